"""One sweep: at each concurrency, that many clients streaming for a while, then the
server's batch sizes under that load.

A client starts no new utterance after `seconds`, and starts at most `max_utterances`, so a
level ends by itself; `level_bound` cancels whatever is still open after that.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from loadtest.client import ClientConfig, Utterance, UtteranceResult, stream_utterance
from loadtest.protocols import vosk_utterance
from loadtest.realtime import realtime_utterance
from loadtest.report import Level
from loadtest.scrape import (
    EOU_LATENCY,
    batch_buckets,
    batch_delta,
    histogram_buckets,
    histogram_quantile,
    scrape,
)

FAILURE_BACKOFF_S = 0.5  # a client waits this long after a failure before its next try
# one utterance over each live protocol (ClientConfig.protocol), each measured the same way
LIVE: dict[str, Callable[[ClientConfig, Utterance], Awaitable[UtteranceResult]]] = {
    "stream": stream_utterance,
    "vosk": vosk_utterance,
    "realtime": realtime_utterance,
}


@dataclass(frozen=True)
class LoadConfig:
    streams: tuple[int, ...]  # concurrency levels, in order
    seconds: float  # how long each level starts new utterances
    offset_s: float  # each client starts after a random delay in [0, offset_s)
    pause_s: float  # idle time between levels, so one level's tail does not meet the next
    progress_s: float  # seconds between progress lines; 0 = none
    seed: int  # for start offsets and starting utterances


async def sweep(
    load: LoadConfig, client: ClientConfig, utterances: list[Utterance], stop_over: float = 0.0
) -> list[Level]:
    """Every level in turn; with `stop_over` > 0, stop after the first level whose p98 is
    over it or that had failures (higher loads will not do better)."""
    levels = []
    for i, streams in enumerate(load.streams):
        if i:
            await asyncio.sleep(load.pause_s)
        level = await run_level(load, client, utterances, streams)
        levels.append(level)
        if stop_over and _over(level, stop_over):
            say(f"[{streams} streams] over the {stop_over:g} ms bound; stopping this sweep")
            break
    return levels


def _over(level: Level, bound_ms: float) -> bool:
    latencies = [u.eou_latency_ms for u in level.utterances if u.eou_latency_ms is not None]
    failed = any(not u.ok for u in level.utterances)
    return failed or not latencies or float(np.percentile(latencies, 98)) > bound_ms


async def run_level(
    load: LoadConfig, client: ClientConfig, utterances: list[Utterance], streams: int
) -> Level:
    """`streams` clients for `load.seconds`; ends by itself within `level_bound`."""
    before = await asyncio.to_thread(scrape, client.url, client.token)
    results: list[UtteranceResult] = []
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + load.seconds
    tasks = [
        asyncio.create_task(_client_loop(client, utterances, deadline, load, k, results))
        for k in range(streams)
    ]
    progress = asyncio.create_task(_progress(streams, start, load, results))
    bound = level_bound(load, client, utterances)
    _, pending = await asyncio.wait(tasks, timeout=bound)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    progress.cancel()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    after = await asyncio.to_thread(scrape, client.url, client.token)
    level = Level(streams, results, None, wall, loadgen_cpu_s=cpu)
    if before is None or after is None:
        level.notes.append("/metrics could not be read; no batch sizes")
    else:
        level.batch_sizes = batch_delta(batch_buckets(before), batch_buckets(after))
        eou = histogram_buckets(before, EOU_LATENCY), histogram_buckets(after, EOU_LATENCY)
        for q in (0.5, 0.98):
            seconds = histogram_quantile(*eou, q)
            level.server_ms[f"p{round(100 * q)}"] = None if seconds is None else 1000 * seconds
    if pending:
        level.notes.append(f"{len(pending)} clients cancelled at the {bound:.0f} s bound")
    say(_progress_line(streams, wall, load.seconds, results, final=True))
    return level


def level_bound(load: LoadConfig, client: ClientConfig, utterances: list[Utterance]) -> float:
    """Seconds after which a level's clients are cancelled: the last possible start, the
    longest utterance at speed, and every timeout on the way, plus slack."""
    longest = max(u.duration for u in utterances) / client.speed
    waits = client.connect_timeout_s + client.final_timeout_s
    return load.offset_s + load.seconds + longest + waits + 5.0


def max_utterances(load: LoadConfig, client: ClientConfig, utterances: list[Utterance]) -> int:
    """The most utterances one client can start within `seconds` (each lasts at least its
    duration at speed; a failed one is followed by a back-off)."""
    shortest = min(u.duration for u in utterances) / client.speed
    return math.ceil(load.seconds / min(shortest, FAILURE_BACKOFF_S)) + 1


async def _client_loop(
    client: ClientConfig,
    utterances: list[Utterance],
    deadline: float,
    load: LoadConfig,
    k: int,
    results: list[UtteranceResult],
) -> None:
    rng = random.Random(load.seed * 1_000_003 + k)
    await asyncio.sleep(rng.uniform(0, load.offset_s))
    index = rng.randrange(len(utterances))
    for _ in range(max_utterances(load, client, utterances)):
        if time.perf_counter() >= deadline:
            return
        utt = utterances[index % len(utterances)]
        index += 1
        try:
            result = await LIVE[client.protocol](client, utt)
        except asyncio.CancelledError:
            results.append(UtteranceResult(utt.text, utt.duration, failure="cancelled at bound"))
            raise
        results.append(result)
        if not result.ok:
            await asyncio.sleep(FAILURE_BACKOFF_S)


async def _progress(
    streams: int, start: float, load: LoadConfig, results: list[UtteranceResult]
) -> None:
    if load.progress_s <= 0:
        return
    while True:
        await asyncio.sleep(load.progress_s)
        say(_progress_line(streams, time.perf_counter() - start, load.seconds, results))


def _progress_line(
    streams: int,
    elapsed: float,
    seconds: float,
    results: list[UtteranceResult],
    final: bool = False,
) -> str:
    latencies = [r.eou_latency_ms for r in results if r.ok and r.eou_latency_ms is not None]
    failed = sum(not r.ok for r in results)
    line = f"[{streams:>3} streams] {elapsed:6.1f}/{seconds:g} s  finals {len(latencies):>4}"
    line += f"  failures {failed}"
    if latencies:
        p50, p98 = np.percentile(latencies, [50, 98])
        line += f"  eou p50 {p50:.1f} ms  p98 {p98:.1f} ms"
    return line + ("  done" if final else "")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
