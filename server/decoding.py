"""The decoder seam: what a session needs of a decoder, and the workers that run it.

Decoding runs off the event loop on a pool of single-thread workers. A stream always lands
on the same worker (its id modulo the pool size), so its decoder state is only ever touched
by one thread and its calls run in submission order; that order is what lets a session
queue `advance` without waiting and overlap it with the stream's next model step.
With `decoder_processes` (the default) each worker thread drives its own decoder process
(server/decoder_procs.py), so decoding runs in parallel despite the GIL; the pool is the one
place that pairs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.greedy import GreedyDecoder
from decoder.loading import DECODER_JSON, load_decoder
from models.config import ModelConfig

T = TypeVar("T")
F32 = npt.NDArray[np.float32]


class WordLike(Protocol):
    @property
    def word(self) -> str: ...
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def conf(self) -> float: ...


class HypothesisLike(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def words(self) -> Sequence[WordLike]: ...
    @property
    def stable_text(self) -> str:
        """The prefix of `text` that later audio cannot change."""
        ...


class DecoderStream(Protocol):
    def advance(self, log_probs: F32) -> None:
        """Consume log-probs [T, V] of the next T output frames."""
        ...

    def partial(self) -> HypothesisLike: ...

    def finalize(self) -> Sequence[HypothesisLike]:
        """The n-best, best first."""
        ...


def advance_and_partial(stream: DecoderStream, log_probs: F32) -> HypothesisLike:
    """`advance` then `partial`, as one call where the stream offers one (a stream in a
    decoder process: one round trip instead of two)."""
    fused = getattr(stream, "advance_and_partial", None)
    if fused is not None:
        result: HypothesisLike = fused(log_probs)
        return result
    stream.advance(log_probs)
    return stream.partial()


class Decoder(Protocol):
    def start(self, hotwords: Sequence[str] = ()) -> DecoderStream: ...


def build_decoder(
    bundle: str | Path, model: ModelConfig, kind: str = "beam", beam_width: int = 0
) -> Decoder:
    """The decoder for a bundle: greedy, or the beam search with the bundle's LM and tuned
    settings when it has a decoder.json (without one, the search runs with no LM).
    `beam_width` > 0 overrides the bundle's."""
    if kind == "greedy":
        return GreedyDecoder(model.alphabet, model.frame_seconds)
    if kind != "beam":
        raise ValueError(f"decoder must be 'beam' or 'greedy', got {kind!r}")
    alphabet = Alphabet.from_list(model.alphabet)
    overrides: dict[str, Any] = {"beam_width": beam_width} if beam_width > 0 else {}
    if (Path(bundle) / DECODER_JSON).is_file():
        return load_decoder(Path(bundle), alphabet, model.frame_seconds, **overrides)
    return BeamSearchDecoder(
        alphabet, DecoderConfig(frame_seconds=model.frame_seconds, **overrides)
    )


class DecoderPool:
    """Decoder workers with stream affinity: worker i is one thread driving `decoders[i]`
    (the same in-process decoder for every worker, or a process of its own each)."""

    def __init__(self, decoders: Sequence[Decoder]) -> None:
        if not decoders:
            raise ValueError("decoder workers must be >= 1, got 0")
        self._decoders = list(decoders)
        self._workers = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"decoder{i}")
            for i in range(len(decoders))
        ]

    def start(self, stream: int, hotwords: Sequence[str] = ()) -> asyncio.Future[DecoderStream]:
        """A new decoder stream for `stream`, on its worker's decoder."""
        decoder = self._decoders[stream % len(self._decoders)]
        return self.submit(stream, decoder.start, hotwords)

    def submit(self, stream: int, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run `fn(*args)` on `stream`'s worker, after everything queued there before."""
        worker = self._workers[stream % len(self._workers)]
        return asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    def close(self) -> None:
        """Stop the worker threads (the decoders belong to whoever built them)."""
        for worker in self._workers:
            worker.shutdown(wait=True, cancel_futures=True)
