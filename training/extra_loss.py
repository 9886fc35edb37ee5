"""The trainer's one seam for a loss beside CTC (training/train.py `Trainer.extra_losses`).

An extra loss owns a training-only head that reads the served network's row-conv output (the
hidden state its output layer reads) and turns the head's output into one loss per
utterance. The heads are wrapped with the model in one module (`WithHeads`), so that
distributed training sees their parameters in the one forward it wraps; they are trained and
checkpointed beside the model and never exported. Distillation from a teacher's encoder
(training/distill.py), which the shipped network's `mid` stages trained with, is the one that
uses it.
"""

from __future__ import annotations

from typing import Protocol

from torch import Tensor, nn

from models.ds2 import DS2
from training.data import Batch


class ExtraLoss(Protocol):
    """A loss term beside CTC's, at `weight`."""

    key: str  # its head's entry in a checkpoint
    log_key: str  # its last step's mean per-utterance loss in log.jsonl
    record: str  # its line in an exported bundle's provenance
    weight: float

    @property
    def head(self) -> nn.Module:
        """Reads the row-conv output [B, T', H]; trained, checkpointed, not exported."""
        ...

    def losses(self, out: Tensor, out_lengths: Tensor, batch: Batch) -> Tensor:
        """Per-utterance losses [B] from the head's output on this batch."""
        ...

    def describe(self) -> str:
        """What the run trained with, for the bundle's provenance."""
        ...


class WithHeads(nn.Module):
    """forward -> (log_probs, out_lengths, each head's output on the row-conv output)."""

    def __init__(self, model: DS2, heads: list[nn.Module]) -> None:
        super().__init__()
        self.model, self.heads = model, nn.ModuleList(heads)

    def forward(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, ...]:
        r, n = self.model.encode(feats, lengths)
        return (self.model.head(r), n, *(h(r) for h in self.heads))
