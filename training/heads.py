"""The acoustic model with the training-only heads that read its hidden state.

Distillation's projection (distill.py) reads the row-conv output, the state the output layer
reads; the voice adversary (adversary.py) reads it or a lower recurrent layer's output. They
are wrapped with the model in one module so that distributed training sees their parameters
in the one forward it wraps; none of them is exported.
"""

from __future__ import annotations

from torch import Tensor, nn

from models.ds2 import DS2
from training.adversary import VoiceAdversary


class WithHeads(nn.Module):
    """forward -> (log_probs [B, T', V], out_lengths [B], projected teacher frames [B, T', D]
    or None, voice logits [B, T', voices] or None)."""

    def __init__(
        self,
        model: DS2,
        projection: nn.Linear | None,
        adversary: VoiceAdversary | None,
        adversary_layer: int = -1,
    ) -> None:
        super().__init__()
        self.model, self.projection, self.adversary = model, projection, adversary
        self.adversary_layer = adversary_layer  # -1: the row-conv output; i: recurrent layer i

    def forward(
        self, feats: Tensor, lengths: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        layers, n = self.model.encode_layers(feats, lengths)
        r = layers[-1]
        projected = self.projection(r) if self.projection is not None else None
        voices = None
        if self.adversary is not None:
            voices = self.adversary(layers[self.adversary_layer])
        return self.model.head(r), n, projected, voices
