"""Faults a soak injects on a schedule (issue 19), and what each one's own check finds.

At set fractions of the run: a decoder worker killed, a tenth of the clients vanishing
mid-stream, a few clients that stop reading, a burst of 3 x `--max-streams` connections;
at the very end, SIGTERM with streams in flight (only to a server the soak started). Each
returns a `FaultEvent`; loadtest/soak_report.py then judges the load streams around it.

A model batch that raises cannot be caused from outside the server; tests/server/
test_faults.py covers it (`test_a_failed_batch_under_load_fails_only_its_own_stream`).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import urllib.error
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from loadtest import misbehave
from loadtest.client import ClientConfig, Utterance, UtteranceResult, describe, stream_utterance
from loadtest.procstats import read_tree
from loadtest.protocols import sleep_until, unwrap, upload
from loadtest.records import FaultEvent, Record
from loadtest.scrape import fetch, http_base

FAULTS = ("kill", "vanish", "stall", "burst", "term")
SCHEDULE = {"kill": 0.3, "vanish": 0.45, "stall": 0.6, "burst": 0.75}  # fractions of the run
BATCH_FAULT = (
    "a model batch that raises cannot be caused from outside the server: "
    "tests/server/test_faults.py covers it "
    "(test_a_failed_batch_under_load_fails_only_its_own_stream)"
)
DECODER_FAILED = r"decoder_error|decoder (failed|could not start)"
OVERLOADED = r"overloaded|slots are busy|HTTP 503|closed 1013"
REPLACE_WAIT_S = 60.0  # longest wait for a killed decoder worker's replacement
BURST_HOLD_S = 2.0  # how long the burst's admitted connections keep their slots
POLL_S = 0.2  # /proc and /metrics offer no event to wait on, so these are asked again


@dataclass(frozen=True)
class FaultSettings:
    burst: int  # connections in the burst (3 x the server's --max-streams)
    stall_wait_s: float  # longest a stalled client waits to be dropped
    grace_s: float  # the server's --shutdown-grace-s (for the SIGTERM at the end)


@dataclass
class Order:
    """A misbehaviour for a load client's next utterance, and its result when done."""

    kind: str  # vanish | stall
    done: asyncio.Future[Record]  # cancelled when the soak ends before the client gets to it
    wait_s: float = 0.0  # stall: the longest wait to be dropped


@dataclass
class Live:
    """The running soak, as its clients, sampler and faults share it."""

    client: ClientConfig
    utterances: list[Utterance]
    streams: int  # load clients
    pid: int | None  # the server's, when it runs here
    process: subprocess.Popen[str] | None  # when the soak started it
    t0: float = field(default_factory=time.perf_counter)
    records: list[Record] = field(default_factory=list)
    orders: dict[int, Order] = field(default_factory=dict)
    events: list[FaultEvent] = field(default_factory=list)  # faults over so far
    open_streams: int = 0  # WebSockets and REST requests open now, fault clients' included
    stopping: bool = False  # set at the end: clients start nothing new

    def now(self) -> float:
        return round(time.perf_counter() - self.t0, 3)

    def add(
        self, result: UtteranceResult, client: int, protocol: str, tag: str, name: str
    ) -> Record:
        record = Record.of(result, self.t0, client, protocol, tag, name)
        self.records.append(record)
        return record

    @contextmanager
    def opened(self) -> Iterator[None]:
        self.open_streams += 1
        try:
            yield
        finally:
            self.open_streams -= 1

    def order(self, client: int, kind: str, wait_s: float = 0.0) -> asyncio.Future[Record]:
        done: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        self.orders[client] = Order(kind, done, wait_s)
        return done


async def inject(
    live: Live, names: tuple[str, ...], duration_s: float, settings: FaultSettings
) -> None:
    """The scheduled faults among `names`, each at its fraction of the run, in order; each
    one's event goes to `live.events` as soon as it is over."""
    for name, at in sorted(SCHEDULE.items(), key=lambda item: item[1]):
        if name in names:
            await sleep_until(live.t0 + at * duration_s)
            await run_fault(live, name, settings)


async def run_fault(live: Live, name: str, settings: FaultSettings) -> None:
    """One fault; a fault that breaks down is reported as not held, and the soak goes on."""
    start = live.now()
    try:
        event = await ACTIONS[name](live, settings)
    except Exception as e:  # the report says what broke, and the soak goes on
        event = FaultEvent(name, start, live.now(), f"broke down: {e!r}", "", False, "-")
    live.events.append(event)


# -- probes ---------------------------------------------------------------------------------


async def readyz(live: Live) -> str:
    """/readyz's status now, or why there was none."""
    try:
        await asyncio.to_thread(fetch, http_base(live.client.url) + "/readyz", None, 5.0)
        return "200"
    except urllib.error.HTTPError as e:
        return str(e.code)
    except OSError as e:
        return describe(unwrap(e))


async def metrics(live: Live) -> str | None:
    try:
        return await asyncio.to_thread(
            fetch, http_base(live.client.url) + "/metrics", live.client.token, 5.0
        )
    except OSError:
        return None


def metric(text: str | None, name: str, labels: str = "") -> float | None:
    """One sample's value in Prometheus text, e.g. metric(t, "harken_errors_total",
    'kind="slow_reader"'); 0 for a labelled counter not yet created, None without text."""
    if text is None:
        return None
    key = re.escape(f"{name}{{{labels}}}" if labels else name)
    found = re.search(rf"^{key}\s+(\S+)", text, re.MULTILINE)
    return float(found.group(1)) if found else (0.0 if labels else None)


async def freed(live: Live, tries: int = 15) -> tuple[bool, str]:
    """The server holds no more streams than the clients have open (it freed those that
    vanished); asked a few times, since a stream's slot is freed just after its final."""
    active = opened = None
    for _ in range(tries):
        before = live.open_streams
        active = metric(await metrics(live), "harken_active_streams")
        opened = max(before, live.open_streams)
        if active is not None and active <= opened:
            return True, f"the server held {active:.0f} streams, the clients had {opened} open"
        await asyncio.sleep(POLL_S)
    return False, f"the server held {active} streams while the clients had {opened} open"


# -- the faults -----------------------------------------------------------------------------


def skipped(name: str, start: float, why: str) -> FaultEvent:
    return FaultEvent(name, start, start, f"not injected: {why}", "", True, "-", skipped=True)


async def kill_decoder(live: Live, settings: FaultSettings) -> FaultEvent:
    """SIGKILL one decoder worker; the server replaces it when a stream next starts on its
    worker, and the streams whose decoder state it held fail with decoder_error."""
    start = live.now()
    if live.pid is None:
        return skipped("kill", start, "no --server-pid, so the server's processes are unknown")
    before = read_tree(live.pid).decoders
    if not before:
        return skipped("kill", start, "the server has no decoder worker processes")
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    replacement = await _replaced(live.pid, victim, len(before))
    end = live.now()
    action = f"SIGKILL to decoder worker pid {victim} (of {len(before)})"
    outcome = (
        f"replaced by pid {replacement} after {end - start:.1f} s"
        if replacement
        else f"not replaced within {REPLACE_WAIT_S:g} s"
    )
    details = {"victim": victim, "replacement": replacement, "workers": len(before)}
    held = replacement is not None
    return FaultEvent(
        "kill", start, end, action, outcome, held, await readyz(live), DECODER_FAILED, details
    )


async def _replaced(pid: int, victim: int, count: int) -> int | None:
    """The new worker's pid once `count` workers run again without `victim`; None if that
    does not happen within REPLACE_WAIT_S."""
    deadline = time.monotonic() + REPLACE_WAIT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        try:
            now = read_tree(pid).decoders
        except ProcessLookupError:
            return None
        if victim not in now and len(now) >= count:
            return max(now)
    return None


async def vanish(live: Live, settings: FaultSettings) -> FaultEvent:
    """A tenth of the load clients (at least one) each start a /v1/stream and vanish
    halfway through it: a TCP reset, no close frame."""
    start = live.now()
    chosen = _spread(live.streams, max(1, round(live.streams / 10)))
    records = await _carry_out(live, chosen, "vanish", 0.0)
    ok, leak = await freed(live)
    end = live.now()
    gone = sum(r.failure is not None and r.failure.startswith("vanished") for r in records)
    action = f"{len(chosen)} of {live.streams} clients vanished mid-stream (TCP reset, no close)"
    outcome = f"{gone} vanished as planned; {leak}"
    held = ok and gone == len(chosen)
    return FaultEvent("vanish", start, end, action, outcome, held, await readyz(live))


async def stall(live: Live, settings: FaultSettings) -> FaultEvent:
    """A few load clients each open a /vosk stream and stop reading; the server should drop
    each once a send has waited its --send-timeout-s (close 1008, slow_reader)."""
    start = live.now()
    chosen = _spread(live.streams, min(3, max(1, live.streams // 10)))
    before = metric(await metrics(live), "harken_errors_total", 'kind="slow_reader"')
    records = await _carry_out(live, chosen, "stall", settings.stall_wait_s)
    after = metric(await metrics(live), "harken_errors_total", 'kind="slow_reader"')
    ok, leak = await freed(live)
    end = live.now()
    dropped = [r for r in records if (r.failure or "").startswith("dropped")]
    counted = None if before is None or after is None else after - before
    action = f"{len(chosen)} client(s) stopped reading their /vosk results"
    took = ", ".join(f"{r.end_s - r.start_s:.1f}" for r in dropped)
    outcome = (
        f"{len(dropped)} dropped by the server (after {took} s); "
        f"slow_reader errors counted: {counted}; {leak}"
    )
    held = ok and len(dropped) == len(chosen) and (counted is None or counted >= len(chosen))
    details = {"endings": [r.failure for r in records], "slow_reader_counted": counted}
    return FaultEvent("stall", start, end, action, outcome, held, await readyz(live), None, details)


async def burst(live: Live, settings: FaultSettings) -> FaultEvent:
    """3 x --max-streams extra connections at once, and a file upload while they are in."""
    start = live.now()
    shortest = min(live.utterances, key=lambda u: u.duration)

    async def probe() -> UtteranceResult:
        result = UtteranceResult(shortest.text, shortest.duration, started=time.perf_counter())
        with live.opened():
            await upload(live.client, shortest, None, result)
        live.add(result, -1, "rest", "probe", shortest.name)
        return result

    done = await misbehave.burst(live.client, settings.burst, BURST_HOLD_S, shortest, probe)
    end = live.now()
    kinds = Counter(_burst_kind(o) for o in done.outcomes)
    other = sorted({o for o in done.outcomes if _burst_kind(o) == "other"})
    action = (
        f"{settings.burst} extra /v1/stream connections at once "
        f"(all in after {done.connected_s:.1f} s)"
    )
    upload_got = done.probe.failure if done.probe and done.probe.failure else "a transcript"
    outcome = (
        f"{kinds['final']} admitted (got their finals), {kinds['refused']} refused with a "
        f"reason, {kinds['other']} otherwise{': ' + '; '.join(other[:3]) if other else ''}; "
        f"a file upload meanwhile got: {upload_got}"
    )
    held = kinds["refused"] > 0 and kinds["other"] == 0
    details = {"outcomes": dict(Counter(done.outcomes).most_common())}
    return FaultEvent(
        "burst", start, end, action, outcome, held, await readyz(live), OVERLOADED, details
    )


def _burst_kind(outcome: str) -> str:
    if outcome == "final":
        return "final"
    return "refused" if re.search(OVERLOADED, outcome) else "other"


async def terminate(live: Live, settings: FaultSettings) -> FaultEvent:
    """SIGTERM to the server with streams in flight (the clients have stopped starting new
    ones): those in flight must get their finals within the grace period, a new stream and
    /readyz must be refused, and the server must exit."""
    start = live.now()
    if live.process is None or live.pid is None:
        return skipped("term", start, "the soak did not start this server")
    in_flight = live.open_streams
    live.process.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)  # uvicorn notices the signal on its next tick (0.1 s)
    refused, ready = await _probe_new_stream(live), await readyz(live)
    code, exited_s = await _exit(live.process, settings.grace_s + 15.0, start, live)
    end = live.now()
    action = f"SIGTERM to the server with {in_flight} streams in flight"
    exit_text = f"exited {code} after {exited_s:.1f} s" if code is not None else "did not exit"
    if code == -signal.SIGTERM:
        exit_text += " (uvicorn re-raises the signal once it has drained)"
    outcome = f"a new stream got: {refused.failure or 'a final'}; the server {exit_text}"
    # uvicorn re-raises the signal once its graceful shutdown is done: -SIGTERM is a clean exit
    held = refused.failure is not None and ready != "200" and code in (0, -signal.SIGTERM)
    details = {"in_flight": in_flight, "exit_code": code, "grace_s": settings.grace_s}
    return FaultEvent("term", start, end, action, outcome, held, ready, None, details)


async def _probe_new_stream(live: Live) -> UtteranceResult:
    shortest = min(live.utterances, key=lambda u: u.duration)
    config = replace(live.client, connect_timeout_s=2.0, final_timeout_s=2.0)
    result = await stream_utterance(config, shortest)
    live.add(result, -1, "stream", "probe", shortest.name)
    return result


async def _exit(
    process: subprocess.Popen[str], timeout: float, start: float, live: Live
) -> tuple[int | None, float]:
    """(exit code, seconds from the signal) once the process has exited; (None, timeout)."""
    try:
        code = await asyncio.to_thread(process.wait, timeout)
    except subprocess.TimeoutExpired:
        return None, timeout
    return code, live.now() - start


ACTIONS: dict[str, Callable[[Live, FaultSettings], Awaitable[FaultEvent]]] = {
    "kill": kill_decoder,
    "vanish": vanish,
    "stall": stall,
    "burst": burst,
    "term": terminate,
}


# -- helpers --------------------------------------------------------------------------------


def _spread(streams: int, k: int) -> list[int]:
    """`k` of the clients 0..streams-1, evenly spread (so every protocol's clients take part)."""
    return sorted({round(i * streams / k) % streams for i in range(k)})


def _utterance_wait(live: Live) -> float:
    longest = max(u.duration for u in live.utterances) / live.client.speed
    return 2 * longest + live.client.connect_timeout_s + live.client.final_timeout_s + 5


async def _carry_out(live: Live, clients: list[int], kind: str, wait_s: float) -> list[Record]:
    """Order each client to misbehave on its next utterance; their records once done (those
    that did not get to it in time, or before the soak ended, are left out)."""
    futures = [live.order(k, kind, wait_s) for k in clients]
    finished, _ = await asyncio.wait(futures, timeout=wait_s + _utterance_wait(live) + 10)
    for k in clients:
        live.orders.pop(k, None)
    return [f.result() for f in finished if not f.cancelled()]
