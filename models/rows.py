"""How one stream becomes network rows, and how the rows' outputs merge back into one.

A stream is heard as (warp candidates x hearings) rows of one network: each of the model's
warp factors (`models/warp.py`), or the features as they are without any; each heard as it is
(or through a speaker's profile), and a second time through a file's fitted transform when it
has one (`models/input_adaptation.py`). Per candidate, a pair's probabilities are averaged;
the candidates then merge as the model's `warp_merge` says: "mean" averages them for the whole
stream, "choose" takes each frame from the most confident so far and keeps that one alone once
`warp_decide_frames` frames of speech decided it. An ensemble's members each do this on their
own and their outputs mix once every member has emitted a frame (a member whose row
convolution looks further ahead emits later: `align_members`).

The streaming runner (`server/runner.py`, a chunk at a time) and the offline forward
(`models/warp.py` `adapted_forward`, `harken eval`, `tune-lm`) both expand and merge through
this module, so streaming cannot drift from evaluation. One network without warps or
transforms is one row and the identity: the features go in untouched and the output comes out
as it is. The merge looks only at frames already produced, so a stream fed in chunks merges
exactly as the whole utterance does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.config import WarpMerge
from models.mixing import mix_numpy

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


class Hearing(Protocol):
    """A transform of candidate k's raw (warped) frames: a profile or a file's transforms."""

    def apply(self, feats: Tensor, k: int) -> Tensor: ...


@dataclass(frozen=True)
class InputTransforms:
    """A recording's fitted transforms: under warp candidate k, raw (warped) feature frames
    x [T, F] are heard as x * gain[k] + offset[k]. `models/input_adaptation.py` fits them
    (and re-exports this class); they live here, below it, because the rows hear through
    them."""

    gain: F32  # [K, F]
    offset: F32  # [K, F]

    @property
    def candidates(self) -> int:
        return len(self.gain)

    def apply(self, feats: Tensor, k: int) -> Tensor:
        """Candidate k's transform of raw frames [..., T, F] (their dtype and device)."""
        gain = torch.from_numpy(self.gain[k]).to(feats.device, feats.dtype)
        offset = torch.from_numpy(self.offset[k]).to(feats.device, feats.dtype)
        return feats * gain + offset


@dataclass(frozen=True)
class PerUtterance:
    """Offline, a batch [B, T, F] whose utterances each have their own hearing (or none)."""

    items: Sequence[Hearing | None]

    def apply(self, feats: Tensor, k: int) -> Tensor:
        return torch.stack(
            [x if h is None else h.apply(x, k) for x, h in zip(feats, self.items, strict=True)]
        )


# The merge rule's choice. A frame counts towards it while the model hears speech: when the
# candidates' mean probability of a character (not blank) passes SPEECH_PROB, and for
# HOLD_FRAMES after (0.5 s at 20 ms output frames), so the blanks between a word's characters
# count too. Silence says nothing about a voice, and a user who pauses before speaking would
# otherwise have the warp fixed before a word.
SPEECH_PROB = 0.5
HOLD_FRAMES = 25
BLANK = 0  # the alphabet puts blank first


def frame_entropy(log_probs: F32) -> F64:
    """Entropy in nats of each output frame's distribution [T, V] -> [T]."""
    lp = log_probs.astype(np.float64)
    return np.asarray(-(np.exp(lp) * lp).sum(axis=1))


@dataclass
class WarpChoice:
    """One stream's choice among K warp factors, updated frame by frame."""

    entropy: F64  # [K] summed entropy of each candidate's counted frames
    neutral: int = 0  # the candidate used while nothing has been heard (factor nearest 1)
    frames: int = 0  # output frames counted (heard near speech)
    since_speech: int | None = None  # frames since the last speech frame; None: none yet
    chosen: int | None = None  # the candidate kept for good, once decided
    mean: bool = False  # average every candidate's probabilities for good: never decide

    @classmethod
    def start(
        cls, k: int, factors: Sequence[float] = (), merge: WarpMerge = "choose"
    ) -> WarpChoice:
        neutral = int(np.argmin([abs(a - 1.0) for a in factors])) if factors else 0
        return cls(np.zeros(k, np.float64), neutral, mean=merge == "mean")

    @property
    def active(self) -> list[int]:
        """Candidates that still have to run."""
        return list(range(len(self.entropy))) if self.chosen is None else [self.chosen]

    def hear(self, speech: bool) -> bool:
        """Advance one frame; whether it counts towards the choice."""
        if speech:
            self.since_speech = 0
        elif self.since_speech is not None:
            self.since_speech += 1
        return self.since_speech is not None and self.since_speech <= HOLD_FRAMES

    @property
    def leader(self) -> int:
        return int(np.argmin(self.entropy)) if self.frames else self.neutral


def select(outputs: Sequence[F32], choice: WarpChoice, decide_frames: int) -> F32:
    """Merge the active candidates' next frames [t, V] (one array each, in `choice.active`
    order) into the stream's output [t, V]; `choice` is updated in place."""
    if choice.mean:
        return log_mean(outputs)
    if choice.chosen is not None:
        assert len(outputs) == 1, "a decided stream runs one candidate"
        return outputs[0]
    assert len(outputs) == len(choice.entropy), "an undecided stream runs every candidate"
    t = len(outputs[0])
    assert all(len(o) == t for o in outputs), "candidates must emit the same frames"
    if not t:
        return outputs[0]
    entropies = np.stack([frame_entropy(o) for o in outputs])
    speech = np.mean([1.0 - np.exp(o[:, BLANK].astype(np.float64)) for o in outputs], axis=0)
    out = np.empty_like(outputs[0])
    for i in range(t):
        if choice.hear(bool(speech[i] > SPEECH_PROB)):
            choice.entropy += entropies[:, i]
            choice.frames += 1
        k = choice.leader
        out[i] = outputs[k][i]
        if choice.frames >= decide_frames:
            choice.chosen = k
            out[i + 1 :] = outputs[k][i + 1 :]
            break
    return out


def log_mean(outputs: Sequence[F32]) -> F32:
    """log of the mean of the candidates' probabilities, frame by frame ([t, V] each)."""
    return mix_numpy(list(outputs), [1.0 / len(outputs)] * len(outputs))


@dataclass(frozen=True)
class RowPlan:
    """How one network hears a stream: its warp factors (none: the features as they are),
    how their copies merge, and the warp itself (`models/warp.py` `row_plan` builds it)."""

    factors: tuple[float, ...]
    merge: WarpMerge
    decide_frames: int  # "choose": frames of speech after which the leader is kept alone
    warp: Callable[[Tensor, float], Tensor] = field(compare=False)  # feats [..., F] by alpha

    @property
    def candidates(self) -> int:
        return max(len(self.factors), 1)

    def identity(self, adapted: bool, profiled: bool) -> bool:
        """One row, merged as it is: no warps, no file transforms, no profile."""
        return not self.factors and not adapted and not profiled

    def start(self) -> WarpChoice | None:
        """A new stream's choice among the warps (None: no warps, nothing to choose)."""
        if not self.factors:
            return None
        return WarpChoice.start(len(self.factors), self.factors, self.merge)

    def expand(
        self,
        feats: Tensor,
        active: Sequence[int],
        transforms: Hearing | None = None,
        profile: Hearing | None = None,
    ) -> list[list[Tensor]]:
        """Per active candidate, its rows of raw frames [..., T, F]: the warped copy as it is
        (or through `profile`), then through `transforms` when there are. Without warps the
        one candidate is `feats` itself, not a copy."""
        rows = []
        for k in active:
            warped = self.warp(feats, self.factors[k]) if self.factors else feats
            heard = [warped if profile is None else profile.apply(warped, k)]
            if transforms is not None:
                heard.append(transforms.apply(warped, k))
            rows.append(heard)
        return rows

    def merge_rows(self, outputs: Sequence[Sequence[F32]], choice: WarpChoice | None) -> F32:
        """One stream's next frames [t, V] from its active candidates' rows' outputs (as
        `expand` laid them out); `choice` is updated in place."""
        merged = [log_mean(rows) if len(rows) > 1 else rows[0] for rows in outputs]
        if choice is None:
            return merged[0]
        return select(merged, choice, self.decide_frames)


@dataclass
class StreamRows:
    """One stream's rows as the runner steps them: candidate-major, `per` rows each."""

    plan: RowPlan
    choice: WarpChoice | None
    per: int = 1  # rows per candidate: 2 with a file's transforms (as is, then through them)

    @classmethod
    def start(cls, plan: RowPlan, adapted: bool) -> StreamRows:
        return cls(plan, plan.start(), 2 if adapted else 1)

    @property
    def active(self) -> list[int]:
        return self.choice.active if self.choice is not None else [0]

    @property
    def count(self) -> int:
        return len(self.active) * self.per

    def expand(
        self, feats: Tensor, transforms: Hearing | None, profile: Hearing | None
    ) -> list[Tensor]:
        """The chunk's rows [T, F], in the order of the stream's states."""
        return [
            row
            for rows in self.plan.expand(feats, self.active, transforms, profile)
            for row in rows
        ]

    def merge(self, outputs: Sequence[F32]) -> tuple[F32, slice | None]:
        """The stream's next frames from its rows' outputs, and, when this step decided its
        warp, the rows (states) to keep: the chosen candidate's."""
        was, per = self.active, self.per
        grouped = [outputs[j : j + per] for j in range(0, len(outputs), per)]
        merged = self.plan.merge_rows(grouped, self.choice)
        chosen = self.choice.chosen if self.choice is not None else None
        if chosen is None or len(was) == 1:
            return merged, None
        at = was.index(chosen) * per
        return merged, slice(at, at + per)


def align_members(
    held: Sequence[F32] | None, emitted: Sequence[F32]
) -> tuple[list[F32], list[F32]]:
    """An ensemble stream's frames each member has emitted (its `held` ones first), split
    into those every member has (to mix now) and the rest (held for the next step)."""
    rows = (
        list(emitted) if held is None else [_join(h, e) for h, e in zip(held, emitted, strict=True)]
    )
    n = min(len(r) for r in rows)
    return [r[:n] for r in rows], [r[n:] for r in rows]


def mix_members(outputs: list[F32], weights: list[float]) -> F32:
    """An ensemble stream's aligned frames [t, V], mixed by the members' shares."""
    return mix_numpy(outputs, weights)


def _join(held: F32, new: F32) -> F32:
    return np.concatenate([held, new]) if len(held) else new
