"""Scoring variants of a dev set's network outputs against each other, for offline probes.

A probe (the experiments of experiments/; their scripts are at the commits cited there) mixes
or picks network outputs several ways and asks which reads a dev set best: greedy CER, beam WER
with a bundle's search, and each variant's paired bootstrap against a baseline. The search is
pure Python and single-threaded, so a forked pool decodes on every core; it shares the loaded
search (its LM and tries) with its workers without pickling.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from decoder.beam import BeamSearchDecoder
from decoder.metrics import cer, wer
from evaluation.compare import paired_bootstrap
from models.metrics import greedy_decode

F32 = npt.NDArray[np.float32]
_DECODER: BeamSearchDecoder | None = None  # the search each forked worker inherits


def _decode(log_probs: F32) -> str:
    assert _DECODER is not None
    return _DECODER.decode(log_probs)[0].text


def beam_texts(decoder: BeamSearchDecoder, outputs: Sequence[F32], processes: int = 2) -> list[str]:
    """The best hypothesis of each output [T, V], decoded by `processes` forked workers."""
    global _DECODER
    _DECODER = decoder
    try:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return pool.map(_decode, outputs, chunksize=4)
    finally:
        _DECODER = None


def score_variants(
    decoder: BeamSearchDecoder,
    alphabet: Sequence[str],
    refs: Sequence[str],
    variants: dict[str, list[F32]],
    base: str,
) -> dict[str, dict[str, float]]:
    """Per variant: greedy CER, beam WER and, but for `base`, the paired bootstrap of its word
    errors against `base`'s (B - A: low, high, P(worse)); each printed as it is scored."""
    words = np.array([len(r.split()) for r in refs])
    rows: dict[str, dict[str, float]] = {}
    errors: dict[str, npt.NDArray[np.int64]] = {}
    for name in [base, *(n for n in variants if n != base)]:
        outs = variants[name]
        hyps = beam_texts(decoder, outs)
        greedy = [greedy_decode(o, alphabet) for o in outs]
        errors[name] = np.array([wer([(r, h)]).errors for r, h in zip(refs, hyps, strict=True)])
        row = {
            "greedy_cer": cer(zip(refs, greedy, strict=True)).rate,
            "beam_wer": wer(zip(refs, hyps, strict=True)).rate,
        }
        line = f"{name:<24} greedy CER {row['greedy_cer']:.2%}  beam WER {row['beam_wer']:.2%}"
        if name != base:
            low, high, p_worse = paired_bootstrap(errors[base], errors[name], words)
            row |= {"vs_base_low": low, "vs_base_high": high, "p_worse": p_worse}
            line += f"  vs {base} {low:+.2%} to {high:+.2%}"
        rows[name] = row
        print(line, flush=True)
    return rows
