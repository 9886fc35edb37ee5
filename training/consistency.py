"""Consistency between two views of each utterance: a frame-level KL term beside CTC.

Every probe since models/results/voicegap.md says the held-out voices' errors are the voices:
the network hears a voice it never met as other sounds. Augmentation shows it many warps,
colours and masks of each training voice, but CTC only asks that each view, alone, spell the
transcript; it never asks that two views of one utterance be heard alike. CR-CTC (Yao et al.
2024) asks exactly that: each utterance is heard twice under independent perturbations, and
each view's per-frame distribution is pulled towards the other's (the other's held fixed),
beside both views' CTC. Here the views differ in what `augment_features` draws (frequency warp,
formant warp, colour, SpecAugment masks), which is to say in the voice, while the waveform's
perturbations (speed, so the two have the same frames) are shared.

Training only: nothing here is exported or served.
"""

from __future__ import annotations

from torch import Tensor

from training.soft_targets import soft_losses


def consistency_losses(log_probs: Tensor, out_lengths: Tensor) -> Tensor:
    """Per-row KL(other view, held fixed || this view) [2B], summed over each row's frames.

    `log_probs` [2B, T', V] holds the first views of B utterances, then their second views in
    the same order (as `collate` stacks them). Each row is pulled towards its twin, whose
    distribution is detached, so both views move towards each other and neither is a teacher.
    Summed like CTC's per-utterance loss, so a weight of 0.2 (CR-CTC's) keeps the scales near."""
    rows = log_probs.shape[0]
    if rows % 2:
        raise ValueError(f"two views of each utterance need an even batch, got {rows} rows")
    b = rows // 2
    if not bool((out_lengths[:b] == out_lengths[b:]).all()):
        raise ValueError("the two views of an utterance must have the same number of frames")
    twins = log_probs.roll(b, dims=0).detach()  # row i's twin is row i + b (mod 2B)
    return soft_losses(log_probs, twins, out_lengths)
