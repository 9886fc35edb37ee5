"""Batch Dispatch (DS2 §7.1): group the chunks that streams have ready into one model step.

The dispatcher decides who runs; a `Runner` computes. It knows streams and opaque chunks,
never tensors, so it imports no torch and is tested with a fake runner.

Shape of the primitive: one ready set (streams with a chunk waiting, in arrival order), one
background task, one future per submitted chunk, and an event that wakes the task when work
arrives; nothing polls. Policies:

- `eager`: as soon as the previous batch is done, take every ready stream (up to
  `max_batch`) and run; never wait for more work. DS2 found this best for user latency.
- `timeout`: wait up to `max_delay_s` after the oldest chunk arrived for a fuller batch,
  as Triton's dynamic batcher does; for comparison.
- `none`: one stream per step; the unbatched baseline.

Invariants: a stream is never twice in one batch (its chunks are sequential state updates);
a failed batch fails only its own streams, each future getting the exception; a stream
that is closed, cancelled or failed has its runner state released exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

C = TypeVar("C")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

WAIT_SMOOTHING = 0.2  # weight of the newest batch in `queue_wait_s` (~ the last 5 batches)

Policy = Literal["eager", "timeout", "none"]
POLICIES: tuple[Policy, ...] = ("eager", "timeout", "none")


@dataclass(frozen=True)
class Work(Generic[C]):
    """One stream's next chunk; `last` asks the runner to finish the stream after it."""

    stream: int
    chunk: C
    last: bool = False


class Runner(Protocol[C, R_co]):
    """The compute side of the seam: run one batch, forget a stream."""

    async def run(self, batch: Sequence[Work[C]]) -> Sequence[R_co]:
        """Advance each stream of `batch` by its chunk; results in the same order."""
        ...

    def release(self, stream: int) -> None:
        """Drop whatever the runner holds for `stream` (idempotent)."""
        ...


class DispatchObserver(Protocol):
    """Metrics hooks; called on the event loop, so they must be cheap."""

    def queued(self, seconds: float) -> None:
        """A chunk waited `seconds` between submit and the start of its batch."""
        ...

    def batch(self, size: int, seconds: float, ok: bool) -> None:
        """A batch of `size` streams took `seconds` in the runner and succeeded if `ok`."""
        ...


class NullObserver:
    """Observer that records nothing."""

    def queued(self, seconds: float) -> None:
        pass

    def batch(self, size: int, seconds: float, ok: bool) -> None:
        pass


class DispatchError(RuntimeError):
    """Base of the dispatcher's own errors."""


class StreamClosed(DispatchError):
    """The stream is not open: never opened, finished, closed, or failed earlier."""


class DispatcherStopped(DispatchError):
    """The dispatcher is not running (not started yet, or shutting down)."""


@dataclass(frozen=True)
class DispatchConfig:
    policy: Policy = "eager"  # eager | timeout | none (see module docstring)
    max_batch: int = 32  # most streams in one step
    max_delay_s: float = 0.005  # timeout policy: longest wait for a fuller batch

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.max_delay_s < 0:
            raise ValueError(f"max_delay_s must be >= 0, got {self.max_delay_s}")


@dataclass
class _Request(Generic[C, R]):
    work: Work[C]
    future: asyncio.Future[R]
    enqueued: float


@dataclass
class _Batch(Generic[C, R]):
    requests: list[_Request[C, R]] = field(default_factory=list)

    @property
    def streams(self) -> set[int]:
        return {r.work.stream for r in self.requests}


class BatchDispatcher(Generic[C, R]):
    """Schedules chunks of many streams onto one `Runner`, one batch at a time."""

    def __init__(
        self,
        runner: Runner[C, R],
        config: DispatchConfig | None = None,
        observer: DispatchObserver | None = None,
    ) -> None:
        self.runner = runner
        self.config = config or DispatchConfig()
        self.observer: DispatchObserver = observer or NullObserver()
        self._ids = itertools.count(1)
        self._open: set[int] = set()
        self._ready: dict[int, deque[_Request[C, R]]] = {}  # insertion order = arrival order
        self._current: _Batch[C, R] = _Batch()
        self._release_after_batch: set[int] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.batches_run = 0
        self._wait_s = 0.0  # moving average over batches of their chunks' mean queue wait

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background task on the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="dispatch")

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Stop the loop; every pending or in-flight chunk fails with `DispatcherStopped`."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        error = DispatcherStopped("the server is shutting down")
        current, self._current = self._current, _Batch()
        for request in current.requests:
            if not request.future.done():
                request.future.set_exception(error)
        for stream in list(self._open):
            self._fail_stream(stream, error)
        self._release_pending()

    # -- the stream API ----------------------------------------------------------------------

    def open_stream(self) -> int:
        """A new stream id; the runner sees it first with its first chunk."""
        stream = next(self._ids)
        self._open.add(stream)
        return stream

    @property
    def active_streams(self) -> int:
        return len(self._open)

    @property
    def queue_wait_s(self) -> float:
        """How long chunks have lately waited for their step (a moving average over the last
        few batches): near zero while the model keeps up, growing once it falls behind."""
        return self._wait_s

    def enqueue(self, stream: int, chunk: C, last: bool = False) -> asyncio.Future[R]:
        """Queue `chunk` for `stream`; the future resolves to its result.

        Chunks of one stream run in submission order, one per batch. Cancelling the future
        closes the stream, since its runner state would otherwise miss a chunk."""
        if not self.alive:
            raise DispatcherStopped("the dispatcher is not running")
        if stream not in self._open:
            raise StreamClosed(f"stream {stream} is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        future.add_done_callback(lambda f: self.close_stream(stream) if f.cancelled() else None)
        self._ready.setdefault(stream, deque()).append(
            _Request(Work(stream, chunk, last), future, loop.time())
        )
        self._wake.set()
        return future

    async def submit(self, stream: int, chunk: C, last: bool = False) -> R:
        """`enqueue` and wait for the result."""
        return await self.enqueue(stream, chunk, last)

    def close_stream(self, stream: int) -> None:
        """End `stream` now: cancel its waiting chunks and free its runner state (after the
        batch it is in, if any). Safe to call more than once."""
        if stream not in self._open:
            return
        self._open.discard(stream)
        for request in self._ready.pop(stream, deque()):
            request.future.cancel()
        if stream in self._current.streams:
            self._release_after_batch.add(stream)
        else:
            self.runner.release(stream)

    # -- the background task -----------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            while not self._ready:
                self._wake.clear()
                await self._wake.wait()
            if self.config.policy == "timeout":
                await self._fill_or_timeout()
            await self._run(self._take())

    async def _fill_or_timeout(self) -> None:
        """Wait until `max_batch` streams are ready or the oldest chunk is `max_delay_s` old."""
        loop = asyncio.get_running_loop()
        oldest = min(q[0].enqueued for q in self._ready.values())
        deadline = oldest + self.config.max_delay_s
        while len(self._ready) < self.config.max_batch:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return

    def _take(self) -> _Batch[C, R]:
        """The head chunk of each ready stream, oldest first, up to the batch limit."""
        limit = 1 if self.config.policy == "none" else self.config.max_batch
        batch: _Batch[C, R] = _Batch()
        for stream in list(self._ready)[:limit]:
            queue = self._ready.pop(stream)
            batch.requests.append(queue.popleft())
            if queue:  # its next chunk waits for a later batch, behind the others
                self._ready[stream] = queue
        return batch

    async def _run(self, batch: _Batch[C, R]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        waits = [start - request.enqueued for request in batch.requests]
        for wait in waits:
            self.observer.queued(wait)
        self._wait_s += WAIT_SMOOTHING * (sum(waits) / len(waits) - self._wait_s)
        self._current = batch
        try:
            results = await self.runner.run([r.work for r in batch.requests])
            if len(results) != len(batch.requests):
                raise RuntimeError(
                    f"runner returned {len(results)} results for {len(batch.requests)} chunks"
                )
        except Exception as error:  # noqa: BLE001 - the batch's own streams carry the error
            self.observer.batch(len(batch.requests), loop.time() - start, False)
            self._finish_failed(batch, error)
        else:
            self.observer.batch(len(batch.requests), loop.time() - start, True)
            self._finish_ok(batch, results)
        finally:
            self.batches_run += 1

    def _finish_ok(self, batch: _Batch[C, R], results: Sequence[R]) -> None:
        self._current = _Batch()
        for request, result in zip(batch.requests, results, strict=True):
            if not request.future.done():
                request.future.set_result(result)
            if request.work.last:
                self._open.discard(request.work.stream)
                self._release_after_batch.add(request.work.stream)
        self._release_pending()

    def _finish_failed(self, batch: _Batch[C, R], error: Exception) -> None:
        self._current = _Batch()
        for request in batch.requests:
            if not request.future.done():
                request.future.set_exception(error)
            self._fail_stream(request.work.stream, error)
        self._release_pending()

    def _fail_stream(self, stream: int, error: BaseException) -> None:
        """Fail every chunk `stream` has waiting and close it."""
        for request in self._ready.pop(stream, deque()):
            if not request.future.done():
                request.future.set_exception(error)
        self._open.discard(stream)
        self._release_after_batch.add(stream)
        if stream not in self._current.streams:
            self._release_pending()

    def _release_pending(self) -> None:
        busy = self._current.streams
        for stream in list(self._release_after_batch - busy):
            self._release_after_batch.discard(stream)
            self.runner.release(stream)
