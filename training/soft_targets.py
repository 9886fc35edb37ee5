"""Soft targets from a trained bundle: a frame-level KL term beside CTC (training only).

An ensemble bundle (models/ensemble.py) reads better than either of its networks but costs
the server one forward pass per network. Training a single network towards the ensemble's
per-frame output distributions moves part of that gain into a network that serves at one
network's cost (knowledge distillation, Hinton et al. 2015; the frame-level term interpolated
with the sequence-level CTC loss as in the annealed f-smoothing seed, without the annealing).

The teacher hears the same (augmented) features as the student, in the same batch, so its
targets follow every perturbation with no alignment bookkeeping; it runs without its speaker
warps, which exist for unheard voices and would multiply its cost on the training voices.
Nothing of it is exported: the served model is the plain student.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from models.config import ModelConfig
from models.ensemble import Networks, load_networks


class SoftTeacher:
    """A bundle's networks (an ensemble's all of them), frozen, giving mixed log-probs."""

    def __init__(self, bundle: str | Path, student: ModelConfig, device: str = "cpu") -> None:
        try:
            self.networks: Networks = load_networks(bundle, device=device)
        except (OSError, ValueError) as e:
            raise ValueError(f"--soft-teacher {bundle}: {e}") from None
        own = self.networks.config
        if own.features != student.features or own.alphabet != student.alphabet:
            raise ValueError(
                f"--soft-teacher {bundle}: its features and alphabet must be the student's "
                "(its per-frame distributions are over the student's characters, frame by frame)"
            )
        if own.time_stride != student.time_stride:
            raise ValueError(
                f"--soft-teacher {bundle}: its time stride ({own.time_stride}) must be the "
                f"student's ({student.time_stride}), so that their output frames line up"
            )
        for model in self.networks.models:
            model.eval().requires_grad_(False)
        self.name = str(bundle)

    @torch.no_grad()
    def __call__(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Mixed log-probs [B, T', V] (float32) and output lengths [B]."""
        lp, n = self.networks.forward(feats, lengths, adapt=False)
        return lp.float(), n


def soft_losses(student: Tensor, teacher: Tensor, out_lengths: Tensor) -> Tensor:
    """Per-utterance KL(teacher || student) [B], summed over each utterance's frames (frames
    past its length add nothing); summed like CTC's loss, so a weight near 1 gives both terms
    a similar scale. Both inputs are log-probs [B, T', V]."""
    t = min(student.shape[1], teacher.shape[1])
    s, q = student[:, :t].float(), teacher[:, :t].float()
    per_frame = (q.exp() * (q - s)).sum(-1)
    valid = torch.arange(t, device=s.device)[None, :] < out_lengths[:, None]
    return (per_frame * valid).sum(1)
