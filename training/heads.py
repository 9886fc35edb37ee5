"""The acoustic model with the training-only heads that read its hidden state.

Distillation's projection (distill.py) and the voice adversary (adversary.py) both read the
row-conv output, the state the output layer reads. They are wrapped with the model in one
module so that distributed training sees their parameters in the one forward it wraps; none
of them is exported.
"""

from __future__ import annotations

from torch import Tensor, nn

from models.ds2 import DS2
from training.adversary import VoiceAdversary


class WithHeads(nn.Module):
    """forward -> (log_probs [B, T', V], out_lengths [B], projected teacher frames [B, T', D]
    or None, voice logits [B, T', voices] or None)."""

    def __init__(
        self, model: DS2, projection: nn.Linear | None, adversary: VoiceAdversary | None
    ) -> None:
        super().__init__()
        self.model, self.projection, self.adversary = model, projection, adversary

    def forward(
        self, feats: Tensor, lengths: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        r, n = self.model.encode(feats, lengths)
        projected = self.projection(r) if self.projection is not None else None
        voices = self.adversary(r) if self.adversary is not None else None
        return self.model.head(r), n, projected, voices
