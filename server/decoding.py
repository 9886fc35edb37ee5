"""The decoder seam: what a session needs of a decoder, and the workers that run it.

Decoding runs off the event loop on a pool of single-thread workers. A stream always lands
on the same worker (its id modulo the pool size), so its decoder state is only ever touched
by one thread and its calls run in submission order; that order is what lets a session
queue `advance` without waiting and overlap it with the stream's next model step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from decoder.greedy import GreedyDecoder
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


class DecoderStream(Protocol):
    def advance(self, log_probs: F32) -> None:
        """Consume log-probs [T, V] of the next T output frames."""
        ...

    def partial(self) -> HypothesisLike: ...

    def finalize(self) -> Sequence[HypothesisLike]:
        """The n-best, best first."""
        ...


class Decoder(Protocol):
    def start(self, hotwords: Sequence[str] = ()) -> DecoderStream: ...


def build_decoder(bundle: str | Path, model: ModelConfig) -> Decoder:
    """The decoder a bundle asks for. Greedy until the LM beam search is wired in."""
    return GreedyDecoder(model.alphabet, model.frame_seconds)


class DecoderPool:
    """`workers` single-thread executors with stream affinity."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"decoder workers must be >= 1, got {workers}")
        self._workers = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"decoder{i}")
            for i in range(workers)
        ]

    def submit(self, stream: int, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run `fn(*args)` on `stream`'s worker, after everything queued there before."""
        worker = self._workers[stream % len(self._workers)]
        return asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    def close(self) -> None:
        for worker in self._workers:
            worker.shutdown(wait=True, cancel_futures=True)
