"""Beam-decode many utterances' outputs on every core, for offline probes.

The search is pure Python and single-threaded, so a probe that decodes several variants of
a dev set spends most of its time there. A forked pool shares the loaded search (its LM and
tries) with its workers without pickling it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from decoder.beam import BeamSearchDecoder

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
