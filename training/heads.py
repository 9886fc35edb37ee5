"""The acoustic model with the training-only heads that read its hidden state.

Distillation's projection (distill.py) reads the row-conv output, the state the output layer
reads; the voice adversary (adversary.py) reads it or a lower recurrent layer's output, as the
phone head (phones.py) does. They are wrapped with the model in one module so that
distributed training sees their parameters in the one forward it wraps; none of them is
exported.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from models.ds2 import DS2
from training.adversary import VoiceAdversary
from training.phones import PhoneHead


def check_layer(name: str, layer: int, rnn_layers: int) -> None:
    """A head's `layer` must index encode_layers' list: -1 the row-conv output, i recurrent
    layer i."""
    if not -1 <= layer < rnn_layers:
        raise ValueError(
            f"{name} must be -1 (the row-conv output) or a recurrent layer, "
            f"0 to {rnn_layers - 1}; got {layer}"
        )


def layer_name(layer: int) -> str:
    """What a head reading `layer` reads, for provenance."""
    return "the row-conv output" if layer == -1 else f"recurrent layer {layer}'s output"


class HeadOutputs(NamedTuple):
    log_probs: Tensor  # [B, T', V] the served output layer's
    out_lengths: Tensor  # [B]
    projected: Tensor | None  # [B, T', D] teacher frames (distillation)
    voices: Tensor | None  # [B, T', voices] logits (the adversary)
    phones: Tensor | None  # [B, T', 40] phone log-probs (the phone head)


class WithHeads(nn.Module):
    """forward -> HeadOutputs; a head that is None gives None."""

    def __init__(
        self,
        model: DS2,
        projection: nn.Linear | None,
        adversary: VoiceAdversary | None,
        adversary_layer: int = -1,
        phones: PhoneHead | None = None,
        phone_layer: int = 1,
    ) -> None:
        super().__init__()
        self.model, self.projection, self.adversary = model, projection, adversary
        self.adversary_layer = adversary_layer  # -1: the row-conv output; i: recurrent layer i
        self.phones, self.phone_layer = phones, phone_layer
        # False while the phone head is probed: it learns from the layer, which it cannot move
        self.phones_reach_network = True

    def forward(self, feats: Tensor, lengths: Tensor) -> HeadOutputs:
        layers, n = self.model.encode_layers(feats, lengths)
        r = layers[-1]
        projected = self.projection(r) if self.projection is not None else None
        voices = None
        if self.adversary is not None:
            voices = self.adversary(layers[self.adversary_layer])
        phones = None
        if self.phones is not None:
            read = layers[self.phone_layer]
            phones = self.phones(read if self.phones_reach_network else read.detach())
        return HeadOutputs(self.model.head(r), n, projected, voices, phones)
