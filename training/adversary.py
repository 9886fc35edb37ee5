"""Speaker-adversarial training: a voice classifier on the hidden state, its gradient reversed.

The default model reads the voices it trained on at a third of the error of voices it never
heard, with the same sentences (models/results/voicegap.md): its hidden state keeps what
tells one voice from another, and the output layer leans on it. A small classifier learns to
name each frame's voice from the row-conv output (the state the output layer reads); its
gradient reaches the network reversed and scaled (Ganin & Lempitsky's gradient reversal, as
speaker-invariant training uses it for ASR), so the network learns to keep the phone and drop
the voice. Training only: the classifier is checkpointed, never exported, and the served
network is unchanged in shape and cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.manifest import Utterance

HIDDEN = 256  # the classifier's one hidden layer


class _Reverse(torch.autograd.Function):
    """Identity forward; the gradient times -scale backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return -ctx.scale * grad, None


class VoiceAdversary(nn.Module):
    """Names the voice of every output frame; what reaches the network is reversed."""

    def __init__(self, hidden: int, voices: Sequence[str], scale: float) -> None:
        super().__init__()
        if len(voices) < 2:
            raise ValueError("an adversary needs at least two voices to tell apart")
        self.voices, self.scale = tuple(voices), scale
        self.net = nn.Sequential(
            nn.Linear(hidden, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, len(voices))
        )

    def forward(self, hidden: Tensor) -> Tensor:
        """[B, T, H] -> voice logits [B, T, V] (float32)."""
        reversed_: Tensor = _Reverse.apply(hidden.float(), self.scale)  # type: ignore[no-untyped-call]
        out: Tensor = self.net(reversed_)
        return out


def voice_losses(logits: Tensor, voices: Tensor, out_lengths: Tensor) -> tuple[Tensor, float]:
    """Per-utterance cross-entropy summed over its frames [B] (the scale of CTC's loss), and
    the share of frames whose voice the classifier named: near 1 / voices once the network
    hides them, near 1 while it does not."""
    b, t, v = logits.shape
    valid = torch.arange(t, device=logits.device)[None, :] < out_lengths[:, None]
    target = voices[:, None].expand(b, t)
    ce = F.cross_entropy(logits.reshape(-1, v), target.reshape(-1), reduction="none")
    ce = (ce.view(b, t) * valid).sum(1)
    named = ((logits.argmax(-1) == target) & valid).sum()
    return ce, float(named) / max(int(valid.sum()), 1)


def voice_ids(utterances: Sequence[Utterance]) -> tuple[list[int], list[str]]:
    """Each utterance's voice as an index into the sorted voice names, and those names; every
    utterance must name its voice (the manifests `harken synth` and `harken prepare` write do)."""
    missing = [str(u.audio) for u in utterances if not u.voice]
    if missing:
        raise ValueError(
            f'speaker-adversarial training needs every utterance\'s "voice"; {len(missing)} '
            f"have none, e.g. {missing[0]}"
        )
    names = sorted({u.voice for u in utterances if u.voice})
    index = {n: i for i, n in enumerate(names)}
    return [index[u.voice] for u in utterances if u.voice], names
