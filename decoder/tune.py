"""Random search of the LM weight alpha and the insertion bonus beta on a dev set, and
sweeps of one setting (the blank penalty, the look-ahead).

The acoustic model runs once (the caller passes its log-probs); each trial only decodes.
The search draws (alpha, beta) uniformly from the given ranges with a fixed seed, so a
rerun gives the same table, and always tries the decoder's current setting first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.beam import BeamSearchDecoder
from decoder.metrics import wer

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Trial:
    alpha: float
    beta: float
    wer: float


@dataclass(frozen=True)
class TuneResult:
    best: Trial
    trials: tuple[Trial, ...]  # in the order tried


def tune(
    decoder: BeamSearchDecoder,
    log_probs: Sequence[F32],
    references: Sequence[str],
    trials: int = 30,
    alpha_range: tuple[float, float] = (0.0, 3.0),
    beta_range: tuple[float, float] = (-1.0, 4.0),
    seed: int = 0,
) -> TuneResult:
    """Try `trials` (alpha, beta) pairs; the best has the lowest WER (ties: first tried)."""
    if len(log_probs) != len(references) or not references:
        raise ValueError("need as many log-prob arrays as references, and at least one")
    if trials < 1:
        raise ValueError("trials must be >= 1")
    points = draw_points(decoder, trials, alpha_range, beta_range, seed)
    table = tuple(_trial(decoder, a, b, log_probs, references) for a, b in points)
    return TuneResult(min(table, key=lambda t: t.wer), table)


def draw_points(
    decoder: BeamSearchDecoder,
    trials: int,
    alpha_range: tuple[float, float],
    beta_range: tuple[float, float],
    seed: int,
) -> list[tuple[float, float]]:
    """The (alpha, beta) pairs `tune` tries, in order: the decoder's own, then seeded draws
    (public so that a caller can split the trials over processes and still choose alike)."""
    rng = np.random.default_rng(seed)
    points = [(decoder.config.alpha, decoder.config.beta)]
    points += [(rng.uniform(*alpha_range), rng.uniform(*beta_range)) for _ in range(trials - 1)]
    return points


def _trial(
    decoder: BeamSearchDecoder,
    alpha: float,
    beta: float,
    log_probs: Sequence[F32],
    refs: Sequence[str],
) -> Trial:
    d = decoder.with_config(alpha=float(alpha), beta=float(beta))
    return Trial(round(float(alpha), 4), round(float(beta), 4), _wer(d, log_probs, refs))


def _wer(decoder: BeamSearchDecoder, log_probs: Sequence[F32], refs: Sequence[str]) -> float:
    hyps = [decoder.decode(lp)[0].text for lp in log_probs]
    return wer(zip(refs, hyps, strict=True)).rate


def sweep_setting(
    decoder: BeamSearchDecoder,
    name: str,
    log_probs: Sequence[F32],
    references: Sequence[str],
    values: Sequence[float],
) -> tuple[float, tuple[tuple[float, float], ...]]:
    """(the value of DecoderConfig field `name` with the lowest WER, ties to the first
    listed; every (value, WER)), at the decoder's other settings. The blank penalty shifts
    how many symbols the search keeps, and the look-ahead how partial words compete, both of
    which the weight and bonus also do: search alpha and beta again at the chosen value."""
    if not values:
        raise ValueError(f"need at least one {name} to try")
    table = tuple(
        (float(v), _wer(decoder.with_config(**{name: float(v)}), log_probs, references))
        for v in values
    )
    return min(table, key=lambda row: row[1])[0], table
