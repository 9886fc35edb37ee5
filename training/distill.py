"""Distillation from a teacher's encoder: an auxiliary loss beside CTC (training only).

A linear map reads the served network's row-conv output (the hidden state its output layer
reads, with its 10 frames of look-ahead) and is trained to point where the teacher's
standardised frame vector points (cosine distance, as DistilHuBERT does). The map is thrown
away at export: the served model is the plain DS2 network, unchanged in shape and cost. What
stays is hidden state shaped by a teacher that has heard far more voices than our corpus.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from training.data import Batch
from training.teacher import TeacherTargets


def distill_losses(predicted: Tensor, targets: Tensor, out_lengths: Tensor) -> Tensor:
    """Per-utterance summed cosine distance [B] over frames that have a target: frames past
    an utterance's length, and target rows that are NaN (past the teacher's end, or an
    utterance with no targets at all), add nothing. Summed over frames like CTC's loss, so a
    weight of 1 gives both terms a similar scale."""
    t = min(predicted.shape[1], targets.shape[1])
    predicted, targets = predicted[:, :t].float(), targets[:, :t]
    have = ~torch.isnan(targets).any(-1)
    have &= torch.arange(t, device=targets.device)[None, :] < out_lengths[:, None]
    cos = F.cosine_similarity(predicted, torch.nan_to_num(targets), dim=-1, eps=1e-6)
    return ((1.0 - cos) * have).sum(1)


class Distillation:
    """The teacher's loss as the trainer's extra loss (training/extra_loss.py): a linear map
    from the row-conv output into the teacher's space, trained towards its targets."""

    key = "projection"
    log_key = "distill_loss"
    record = "distillation"

    def __init__(self, teacher: TeacherTargets, hidden: int, weight: float) -> None:
        self.teacher, self.weight = teacher, weight
        self.head = torch.nn.Linear(hidden, teacher.dim)

    def losses(self, out: Tensor, out_lengths: Tensor, batch: Batch) -> Tensor:
        if batch.teacher is None:
            raise ValueError("a distilling run got a batch without teacher targets")
        return distill_losses(out, batch.teacher.to(out.device), out_lengths)

    def describe(self) -> str:
        return f"{self.teacher.name}, cosine on the row-conv output, weight {self.weight:g}"
