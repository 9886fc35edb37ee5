"""BatchDispatcher with a fake runner whose batches the test opens one by one.

Each `run` records its batch and waits on a gate the test sets, so every interleaving
here is decided by events and asyncio's FIFO scheduling, never by wall-clock sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from server.dispatch import (
    BatchDispatcher,
    DispatchConfig,
    DispatcherStopped,
    StreamClosed,
    Work,
)


class GatedRunner:
    """Returns chunk * 10 for each stream once the test opens the batch's gate."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int, bool]]] = []
        self.started: asyncio.Queue[asyncio.Event] = asyncio.Queue()
        self.released: list[int] = []
        self.fail_with: Exception | None = None
        self.short_results = False

    async def run(self, batch: Sequence[Work[int]]) -> Sequence[int]:
        self.batches.append([(w.stream, w.chunk, w.last) for w in batch])
        gate = asyncio.Event()
        self.started.put_nowait(gate)
        await gate.wait()
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error
        results = [w.chunk * 10 for w in batch]
        return results[:-1] if self.short_results else results

    def release(self, stream: int) -> None:
        self.released.append(stream)

    async def open_next(self) -> None:
        """Let the next batch finish."""
        (await self.started.get()).set()


class Recorder:
    def __init__(self) -> None:
        self.waits: list[float] = []
        self.sizes: list[tuple[int, bool]] = []

    def queued(self, seconds: float) -> None:
        self.waits.append(seconds)

    def batch(self, size: int, seconds: float, ok: bool) -> None:
        assert seconds >= 0
        self.sizes.append((size, ok))


Body = Callable[[BatchDispatcher[int, int], GatedRunner], Awaitable[None]]


def drive(body: Body, **config: object) -> None:
    """Run `body` against a started dispatcher, then stop it."""

    async def main() -> None:
        runner = GatedRunner()
        dispatcher: BatchDispatcher[int, int] = BatchDispatcher(runner, DispatchConfig(**config))  # type: ignore[arg-type]
        dispatcher.start()
        try:
            await body(dispatcher, runner)
        finally:
            await dispatcher.stop()

    asyncio.run(main())


def test_eager_runs_the_first_chunk_alone_then_groups_what_arrived_meanwhile() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a, b, c = d.open_stream(), d.open_stream(), d.open_stream()
        fa = d.enqueue(a, 1)
        gate = await r.started.get()  # batch 1 is running with only `a`: eager never waits
        fb, fc, fa2 = d.enqueue(b, 2), d.enqueue(c, 3), d.enqueue(a, 4)
        gate.set()
        assert await fa == 10
        await r.open_next()
        assert [await fb, await fc, await fa2] == [20, 30, 40]
        assert r.batches == [[(a, 1, False)], [(b, 2, False), (c, 3, False), (a, 4, False)]]

    drive(body)


def test_a_stream_is_never_twice_in_one_batch_and_keeps_its_order() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a, b = d.open_stream(), d.open_stream()
        futures = [d.enqueue(a, i) for i in range(3)] + [d.enqueue(b, 7)]
        for _ in range(3):
            await r.open_next()
        assert [await f for f in futures] == [0, 10, 20, 70]
        assert r.batches == [[(a, 0, False), (b, 7, False)], [(a, 1, False)], [(a, 2, False)]]

    drive(body)


def test_max_batch_splits_ready_streams_oldest_first() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        streams = [d.open_stream() for _ in range(5)]
        futures = [d.enqueue(s, s) for s in streams]
        for _ in range(3):
            await r.open_next()
        await asyncio.gather(*futures)
        assert [[w[0] for w in batch] for batch in r.batches] == [
            streams[0:2],
            streams[2:4],
            streams[4:5],
        ]

    drive(body, max_batch=2)


def test_policy_none_runs_one_stream_per_step() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        futures = [d.enqueue(d.open_stream(), i) for i in range(3)]
        for _ in range(3):
            await r.open_next()
        assert await asyncio.gather(*futures) == [0, 10, 20]
        assert [len(b) for b in r.batches] == [1, 1, 1]

    drive(body, policy="none")


async def _busy_then_three(
    d: BatchDispatcher[int, int], r: GatedRunner
) -> list[asyncio.Future[int]]:
    """A full first batch runs (no policy waits for it); meanwhile `a` becomes ready; right
    after the batch ends, `b` and `c` arrive. The limit is max_batch=3."""
    first = [d.enqueue(d.open_stream(), 0) for _ in range(3)]
    a, b, c = (d.open_stream() for _ in range(3))
    gate = await r.started.get()
    fa = d.enqueue(a, 1)
    gate.set()
    await asyncio.gather(*first)  # now the dispatcher has started `a` (eager) or waits (timeout)
    return [fa, d.enqueue(b, 2), d.enqueue(c, 3)]


def test_eager_does_not_wait_for_a_fuller_batch() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        futures = await _busy_then_three(d, r)
        await r.open_next()
        await r.open_next()
        assert await asyncio.gather(*futures) == [10, 20, 30]
        assert [len(b) for b in r.batches] == [3, 1, 2]

    drive(body, max_batch=3)


def test_timeout_waits_for_a_full_batch() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        futures = await _busy_then_three(d, r)
        await r.open_next()
        assert await asyncio.gather(*futures) == [10, 20, 30]
        assert [len(b) for b in r.batches] == [3, 3]

    drive(body, policy="timeout", max_batch=3, max_delay_s=60.0)


def test_timeout_runs_a_partial_batch_when_the_delay_expires() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        fa = d.enqueue(d.open_stream(), 5)
        await r.open_next()  # arrives once the 10 ms delay is over, with only one stream
        assert await fa == 50

    drive(body, policy="timeout", max_batch=8, max_delay_s=0.01)


def test_a_failed_batch_fails_only_its_own_streams() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a, b, c = d.open_stream(), d.open_stream(), d.open_stream()
        fa, fb = d.enqueue(a, 1), d.enqueue(b, 2)
        fa2 = d.enqueue(a, 3)  # queued behind the failing chunk: fails with it
        gate = await r.started.get()
        fc = d.enqueue(c, 4)
        r.fail_with = RuntimeError("CUDA fell over")
        gate.set()
        for future in (fa, fb, fa2):
            with pytest.raises(RuntimeError, match="CUDA fell over"):
                await future
        await r.open_next()
        assert await fc == 40  # the server keeps serving
        assert sorted(r.released) == sorted([a, b])
        with pytest.raises(StreamClosed):
            d.enqueue(a, 5)
        assert d.alive and d.active_streams == 1

    drive(body)


def test_a_runner_returning_too_few_results_fails_the_batch() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        fa, fb = d.enqueue(d.open_stream(), 1), d.enqueue(d.open_stream(), 2)
        r.short_results = True
        await r.open_next()
        for future in (fa, fb):
            with pytest.raises(RuntimeError, match="1 results for 2 chunks"):
                await future

    drive(body)


def test_cancelling_a_waiting_chunk_closes_and_frees_its_stream_only() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        x, a, b = d.open_stream(), d.open_stream(), d.open_stream()
        fx = d.enqueue(x, 0)
        gate = await r.started.get()
        queued = asyncio.Event()

        async def client() -> int:
            future = d.enqueue(a, 1)
            queued.set()
            return await future

        task = asyncio.create_task(client())
        fb = d.enqueue(b, 2)
        await queued.wait()
        task.cancel()  # e.g. the client's connection dropped
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.released == [a]
        gate.set()
        await fx
        await r.open_next()
        assert await fb == 20
        assert r.batches[1] == [(b, 2, False)]  # the cancelled chunk never ran

    drive(body)


def test_closing_a_stream_in_flight_frees_it_after_its_batch() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a = d.open_stream()
        fa, fa2 = d.enqueue(a, 1), d.enqueue(a, 2)
        gate = await r.started.get()
        d.close_stream(a)
        assert fa2.cancelled()
        assert r.released == []  # the runner is still using its state
        gate.set()
        assert await fa == 10
        assert r.released == [a]
        d.close_stream(a)
        assert r.released == [a]  # exactly once

    drive(body)


def test_last_chunk_finishes_the_stream() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a = d.open_stream()
        fa = d.enqueue(a, 1, last=True)
        await r.open_next()
        assert await fa == 10
        assert r.batches == [[(a, 1, True)]] and r.released == [a]
        with pytest.raises(StreamClosed, match="not open"):
            d.enqueue(a, 2)

    drive(body)


def test_stop_fails_pending_and_in_flight_chunks() -> None:
    async def body(d: BatchDispatcher[int, int], r: GatedRunner) -> None:
        a, b = d.open_stream(), d.open_stream()
        fa = d.enqueue(a, 1)
        await r.started.get()
        fa2, fb = d.enqueue(a, 2), d.enqueue(b, 3)
        await d.stop()
        for future in (fa, fa2, fb):
            with pytest.raises(DispatcherStopped):
                await future
        assert sorted(r.released) == [a, b] and not d.alive
        with pytest.raises(DispatcherStopped):
            d.enqueue(a, 4)

    drive(body)


def test_observer_sees_batch_sizes_and_queue_waits() -> None:
    async def main() -> None:
        runner, recorder = GatedRunner(), Recorder()
        d: BatchDispatcher[int, int] = BatchDispatcher(runner, observer=recorder)
        d.start()
        futures = [d.enqueue(d.open_stream(), i) for i in range(3)]
        await runner.open_next()
        await asyncio.gather(*futures)
        runner.fail_with = ValueError("bad")
        failing = d.enqueue(d.open_stream(), 9)
        await runner.open_next()
        with pytest.raises(ValueError):
            await failing
        await d.stop()
        assert recorder.sizes == [(3, True), (1, False)]
        assert len(recorder.waits) == 4 and min(recorder.waits) >= 0

    asyncio.run(main())


def test_queue_wait_rises_while_the_model_lags_and_falls_as_it_catches_up() -> None:
    async def body(d: BatchDispatcher[int, int], runner: GatedRunner) -> None:
        a, b = d.open_stream(), d.open_stream()
        first = d.enqueue(a, 1)
        await asyncio.sleep(0)
        waiting = d.enqueue(b, 2)  # waits behind a's batch, which the test holds 60 ms
        await asyncio.sleep(0.06)
        await runner.open_next()
        await first
        await runner.open_next()
        await waiting
        lagging = d.queue_wait_s
        assert lagging > 0.005  # a 60 ms wait weighs in at 0.2 x 60 ms
        for i in range(10):  # then chunks that find the model free
            done = d.enqueue(a, i)
            await runner.open_next()
            await done
        assert d.queue_wait_s < lagging / 5

    drive(body)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"policy": "greedy"}, "policy must be one of"),
        ({"max_batch": 0}, "max_batch must be >= 1"),
        ({"max_delay_s": -1.0}, "max_delay_s must be >= 0"),
    ],
)
def test_config_errors_say_what_to_change(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DispatchConfig(**config)  # type: ignore[arg-type]
