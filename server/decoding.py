"""The decoder seam: what a session needs of a decoder, and the workers that run it.

Decoding runs off the event loop on a pool of single-thread workers. A stream always lands
on the same worker (its id modulo the pool size), so its decoder state is only ever touched
by one thread and its calls run in submission order; that order is what lets a session
queue `advance` without waiting and overlap it with the stream's next model step.
With `decoder_processes` (the default) each worker thread drives its own decoder process
(server/decoder_procs.py), so decoding runs in parallel despite the GIL; the pool is the one
place that pairs them. A worker takes every job queued for it at once, and sends the
calls among them that go to its decoder process as one message: one round trip, one
wake-up of the event loop, per worker per step instead of per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
Outcome = tuple[bool, Any]  # (True, a call's value) or (False, the exception it raised)
MAX_GROUP = 64  # jobs a decoder worker takes from its queue at once, at most


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
    def advance(self, log_probs: F32, threshold: float | None = None) -> None:
        """Consume log-probs [T, V] of the next T output frames; a beam search keeps only
        beams within `threshold` of the best for them, where that is narrower than its own
        setting (None: its own)."""
        ...

    def partial(self) -> HypothesisLike: ...

    def finalize(self) -> Sequence[HypothesisLike]:
        """The n-best, best first."""
        ...


def advance_and_partial(
    stream: DecoderStream, log_probs: F32, threshold: float | None = None
) -> HypothesisLike:
    """`advance` then `partial`, as one call where the stream offers one (a stream in a
    decoder process: one round trip instead of two)."""
    fused = getattr(stream, "advance_and_partial", None)
    if fused is not None:
        result: HypothesisLike = fused(log_probs, threshold)
        return result
    stream.advance(log_probs, threshold)
    return stream.partial()


class Decoder(Protocol):
    def start(self, hotwords: Sequence[str] = ()) -> DecoderStream: ...


def build_decoder(
    bundle: str | Path,
    model: ModelConfig,
    kind: str = "beam",
    search: Mapping[str, float] | None = None,
) -> Decoder:
    """The decoder for a bundle: greedy, or the beam search with the bundle's LM and tuned
    settings when it has a decoder.json (without one, the search runs with no LM). `search`
    replaces some of those settings by their `DecoderConfig` names (the serve flags':
    `ServerConfig.search`); an unknown name is refused."""
    if kind == "greedy":
        return GreedyDecoder(model.alphabet, model.frame_seconds)
    if kind != "beam":
        raise ValueError(f"decoder must be 'beam' or 'greedy', got {kind!r}")
    alphabet = Alphabet.from_list(model.alphabet)
    overrides: dict[str, Any] = dict(search or {})
    unknown = set(overrides) - {f.name for f in dataclasses.fields(DecoderConfig)}
    if unknown:
        raise ValueError(f"unknown search settings {sorted(unknown)}")
    if (Path(bundle) / DECODER_JSON).is_file():
        return load_decoder(Path(bundle), alphabet, model.frame_seconds, **overrides)
    return BeamSearchDecoder(
        alphabet, DecoderConfig(**{"frame_seconds": model.frame_seconds, **overrides})
    )


class DecoderPool:
    """Decoder workers with stream affinity: worker i is one thread driving `decoders[i]`
    (the same in-process decoder for every worker, or a process of its own each)."""

    def __init__(self, decoders: Sequence[Decoder]) -> None:
        if not decoders:
            raise ValueError("decoder workers must be >= 1, got 0")
        self._decoders = list(decoders)
        self._workers = [_Worker(f"decoder{i}") for i in range(len(decoders))]

    def start(self, stream: int, hotwords: Sequence[str] = ()) -> asyncio.Future[DecoderStream]:
        """A new decoder stream for `stream`, on its worker's decoder."""
        decoder = self._decoders[stream % len(self._decoders)]
        return self.submit(stream, decoder.start, hotwords)

    def submit(self, stream: int, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run `fn(*args)` on `stream`'s worker, after everything queued there before."""
        return self._put(stream, _Job(asyncio.get_running_loop(), functools.partial(fn, *args)))

    def call(
        self, stream: int, decoder_stream: DecoderStream, op: str, *args: Any
    ) -> asyncio.Future[Any]:
        """`decoder_stream.op(*args)` ("advance", "partial", "advance_and_partial" or
        "finalize") on `stream`'s worker, after everything queued there before; calls that
        go to one decoder process travel together."""
        job = _Job(asyncio.get_running_loop(), None, decoder_stream, op, args)
        return self._put(stream, job)

    def _put(self, stream: int, job: _Job) -> asyncio.Future[Any]:
        self._workers[stream % len(self._workers)].put(job)
        return job.future

    def close(self) -> None:
        """Stop the worker threads; jobs not yet taken are cancelled (the decoders belong
        to whoever built them)."""
        for worker in self._workers:
            worker.close()


@dataclass
class _Job:
    """A function to run, or a call on a decoder stream, and the future that gets its result."""

    loop: asyncio.AbstractEventLoop
    run: Callable[[], Any] | None
    stream: DecoderStream | None = None
    op: str = ""
    args: tuple[Any, ...] = ()
    future: asyncio.Future[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.future = self.loop.create_future()

    def __call__(self) -> Any:
        if self.run is not None:
            return self.run()
        assert self.stream is not None
        if self.op == "advance_and_partial":
            return advance_and_partial(self.stream, *self.args)
        return getattr(self.stream, self.op)(*self.args)

    def batched(self) -> tuple[Any, Any] | None:
        """(decoder process, request) where the call can travel with others to one process."""
        to_process = getattr(self.stream, "batched", None)
        if self.run is not None or to_process is None:
            return None
        target: tuple[Any, Any] = to_process(self.op, *self.args)
        return target


class _Worker:
    """One thread that runs its jobs in the order they came. It takes all that are queued at
    once; consecutive calls that go to one decoder process go as one message."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def put(self, job: _Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                job = self._jobs.get_nowait()
                if job is not None:
                    _cancel(job)
        self._jobs.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while True:
            jobs = [self._jobs.get()]
            with contextlib.suppress(queue.Empty):
                while len(jobs) < MAX_GROUP and jobs[-1] is not None:
                    jobs.append(self._jobs.get_nowait())
            live = [job for job in jobs if job is not None]
            outcomes = _run(live)
            loops = {job.loop for job in live}
            for loop in loops:
                mine = [(j, o) for j, o in zip(live, outcomes, strict=True) if j.loop is loop]
                with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                    loop.call_soon_threadsafe(_settle, mine)
            if len(live) < len(jobs):
                return


def _run(jobs: list[_Job]) -> list[Outcome]:
    """Each job's outcome, in order; runs of calls to one decoder process in one message."""
    targets = [job.batched() for job in jobs]
    outcomes: list[Outcome] = []
    i = 0
    while i < len(jobs):
        target = targets[i]
        if target is None:
            try:
                outcomes.append((True, jobs[i]()))
            except Exception as e:  # the job's own error, for its awaiting stream only
                outcomes.append((False, e))
            i += 1
            continue
        process, requests = target[0], [target[1]]
        j = i + 1
        while j < len(jobs) and (other := targets[j]) is not None and other[0] is process:
            requests.append(other[1])
            j += 1
        try:
            outcomes += process.call_many(requests)
        except Exception as e:  # the process is gone: every call in the message fails
            outcomes += [(False, e)] * len(requests)
        i = j
    return outcomes


def _settle(done: list[tuple[_Job, Outcome]]) -> None:
    for job, (ok, value) in done:
        if job.future.done():  # its awaiting task was cancelled
            continue
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)


def _cancel(job: _Job) -> None:
    with contextlib.suppress(RuntimeError):
        job.loop.call_soon_threadsafe(job.future.cancel)
