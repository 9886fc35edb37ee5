"""`harken loadtest`: concurrent real-time streams against a server, swept over concurrency.

    harken loadtest --url ws://HOST:PORT --manifest M.jsonl --streams 1,2,5,10,20 \
        --seconds 60 --out DIR
    harken loadtest --compare-policies --manifest M.jsonl --out DIR [--serve-args "..."]
    harken loadtest --compare-policies --url ws://A --url ws://B --labels eager,none ...

At each concurrency N, N clients each stream manifest utterances one after another, paced
at real time x `--speed`, each starting after a random offset at a random utterance. A
client starts no new utterance after `--seconds`, and makes at most a bounded number, so
every level ends by itself; a hard bound cancels whatever is still open after that. The
server's /metrics is read before and after each level for its batch sizes. Traffic goes
only to the URLs given (or, with --compare-policies alone, to servers it starts locally).

Exit status: 0 when every utterance got its final (with --compare-policies: when every
server was measured, since loads past a server's limit are expected to fail), 1 when some
failed (the results are still written), 2 for bad arguments or a server that would not start.
Pass server flags as one string with `=`: `--serve-args="--bundle B --max-streams 64"`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import random
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.client import (
    MAX_CHUNK_MS,
    MIN_CHUNK_MS,
    ClientConfig,
    Utterance,
    UtteranceResult,
    stream_utterance,
)
from loadtest.launch import LaunchError, launched
from loadtest.report import Level, write_comparison, write_report
from loadtest.scrape import batch_delta, scrape_batches

POLICIES = ("eager", "timeout", "none")
FAILURE_BACKOFF_S = 0.5  # a client waits this long after a failure before its next try


@dataclass(frozen=True)
class LoadConfig:
    streams: tuple[int, ...]  # concurrency levels, in order
    seconds: float  # how long each level starts new utterances
    offset_s: float  # each client starts after a random delay in [0, offset_s)
    pause_s: float  # idle time between levels, so one level's tail does not meet the next
    progress_s: float  # seconds between progress lines; 0 = none
    seed: int  # for start offsets and starting utterances


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--url", action="append", default=[], help="ws://HOST:PORT; repeatable")
    parser.add_argument("--manifest", required=True, help="JSON Lines of {audio, text}")
    parser.add_argument("--streams", default="1,2,5,10,20", help="concurrency levels")
    parser.add_argument("--seconds", type=float, default=60.0, help="load time per level")
    parser.add_argument(
        "--chunk-ms",
        type=int,
        default=100,
        help=f"audio per frame, {MIN_CHUNK_MS}..{MAX_CHUNK_MS}",
    )
    parser.add_argument("--speed", type=float, default=1.0, help="1 = real time")
    parser.add_argument("--offset-s", type=float, default=1.0, help="random start offset, max")
    parser.add_argument("--limit", type=int, default=200, help="utterances read from manifest")
    parser.add_argument("--max-utterance-s", type=float, default=20.0, help="longer are skipped")
    parser.add_argument("--no-partials", action="store_true", help="ask for finals only")
    parser.add_argument("--token", default=os.environ.get("HARKEN_TOKEN"), help="bearer token")
    parser.add_argument("--connect-timeout-s", type=float, default=10.0)
    parser.add_argument("--final-timeout-s", type=float, default=10.0, help="wait after eos")
    parser.add_argument("--pause-s", type=float, default=1.0, help="idle time between levels")
    parser.add_argument("--progress-s", type=float, default=2.0, help="0 silences progress")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="loadtest-out", help="directory for the report")
    group = parser.add_argument_group("policy comparison")
    group.add_argument("--compare-policies", action="store_true")
    group.add_argument("--policies", default=",".join(POLICIES), help="servers to start")
    group.add_argument("--labels", default="", help="names of the --url servers, comma-separated")
    group.add_argument("--bound-ms", type=float, default=200.0, help="p98 bound")
    group.add_argument("--serve-args", default="", help="extra `harken serve` flags, one string")
    group.add_argument(
        "--full-sweep", action="store_true", help="keep going past the first level over the bound"
    )


def main(args: argparse.Namespace) -> int:
    try:
        load, client, utterances = _configure(args)
    except ValueError as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    meta = _meta(args, load, client, len(utterances))
    out = Path(args.out)
    if args.compare_policies:
        return _compare(args, load, client, utterances, out, meta)
    levels = asyncio.run(sweep(load, client, utterances))
    results = write_report(out, levels, meta)
    print(f"report: {out / 'report.md'}", file=sys.stderr)
    return 1 if any(r["failures"] for r in results) else 0


def _configure(args: argparse.Namespace) -> tuple[LoadConfig, ClientConfig, list[Utterance]]:
    urls = args.url or []
    if not urls and not args.compare_policies:
        raise ValueError("give --url ws://HOST:PORT (or --compare-policies to start servers)")
    if len(urls) > 1 and not args.compare_policies:
        raise ValueError("several --url values are compared only with --compare-policies")
    streams = _int_list(args.streams, "--streams")
    if args.seconds <= 0 or args.offset_s < 0 or args.pause_s < 0:
        raise ValueError("--seconds must be > 0; --offset-s and --pause-s >= 0")
    client = ClientConfig(
        url=urls[0] if urls else "ws://127.0.0.1:0",
        chunk_ms=args.chunk_ms,
        speed=args.speed,
        partials=not args.no_partials,
        token=args.token,
        connect_timeout_s=args.connect_timeout_s,
        final_timeout_s=args.final_timeout_s,
    )
    load = LoadConfig(
        tuple(streams), args.seconds, args.offset_s, args.pause_s, args.progress_s, args.seed
    )
    return load, client, load_manifest(Path(args.manifest), args.limit, args.max_utterance_s)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{flag} needs positive integers, got {text!r}")
    return values


def load_manifest(path: Path, limit: int, max_seconds: float) -> list[Utterance]:
    """Up to `limit` utterances of at most `max_seconds`, as mono PCM16 at their own rate."""
    import soundfile as sf

    if not path.is_file():
        raise ValueError(f"manifest {path} does not exist")
    utterances: list[Utterance] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if len(utterances) >= limit:
            break
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            audio, rate = sf.read(path.parent / entry["audio"], dtype="int16", always_2d=True)
        except (ValueError, KeyError, TypeError, RuntimeError, OSError) as e:
            raise ValueError(f"{path}:{number}: cannot read this entry ({e})") from None
        mono = audio.mean(axis=1).astype("<i2") if audio.shape[1] > 1 else audio[:, 0]
        utt = Utterance(mono.astype("<i2").tobytes(), int(rate), entry["text"], entry["audio"])
        if 0 < utt.duration <= max_seconds:
            utterances.append(utt)
    if not utterances:
        raise ValueError(f"{path} has no readable utterance of at most {max_seconds:g} s")
    return utterances


# -- one sweep ------------------------------------------------------------------------------


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
            _say(f"[{streams} streams] over the {stop_over:g} ms bound; stopping this sweep")
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
    before = await asyncio.to_thread(scrape_batches, client.url, client.token)
    results: list[UtteranceResult] = []
    start = time.perf_counter()
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
    wall = time.perf_counter() - start
    after = await asyncio.to_thread(scrape_batches, client.url, client.token)
    level = Level(streams, results, None, wall)
    if before is None or after is None:
        level.notes.append("/metrics could not be read; no batch sizes")
    else:
        level.batch_sizes = batch_delta(before, after)
    if pending:
        level.notes.append(f"{len(pending)} clients cancelled at the {bound:.0f} s bound")
    _say(_progress_line(streams, wall, load.seconds, results, final=True))
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
            result = await stream_utterance(client, utt)
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
        _say(_progress_line(streams, time.perf_counter() - start, load.seconds, results))


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


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- policy comparison ----------------------------------------------------------------------


def _compare(
    args: argparse.Namespace,
    load: LoadConfig,
    client: ClientConfig,
    utterances: list[Utterance],
    out: Path,
    meta: dict[str, Any],
) -> int:
    """Each server in turn (given URLs, or servers started per policy), then the ratios."""
    stop_over = 0.0 if args.full_sweep else args.bound_ms
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, url in _targets(args):
            _say(f"== {name} ==")
            with url as ws_url:
                levels = asyncio.run(
                    sweep(load, replace(client, url=ws_url), utterances, stop_over)
                )
            results = write_report(out / name, levels, {**meta, "run": name, "url": ws_url})
            runs[name] = results
    except (LaunchError, ValueError) as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    comparison = write_comparison(out, runs, args.bound_ms, meta)
    for name, n in comparison["sustained_streams"].items():
        _say(f"{name}: sustains {n} streams with p98 <= {args.bound_ms:g} ms")
    for ratio, value in comparison["ratios"].items():
        _say(f"{ratio}: {value}")
    _say(f"report: {out / 'compare.md'}")
    return 0


def _targets(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(name, context manager yielding a ws:// URL) per server to measure."""
    if args.url:
        labels = [s for s in args.labels.split(",") if s] or [f"server{i}" for i in range(1, 99)]
        if len(labels) < len(args.url):
            raise ValueError(f"--labels names {len(labels)} servers, --url gives {len(args.url)}")
        return [(label, _given(url)) for label, url in zip(labels, args.url, strict=False)]
    policies = [p for p in args.policies.split(",") if p]
    unknown = set(policies) - set(POLICIES)
    if unknown:
        raise ValueError(f"--policies must be among {POLICIES}, got {sorted(unknown)}")
    serve_args = shlex.split(args.serve_args)
    log_dir = Path(args.out)
    return [(p, launched(p, serve_args, log_dir / p / "server.log")) for p in policies]


class _given:
    """A URL the user gave, as a context manager like `launched`."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc: object) -> None:
        return None


def _meta(
    args: argparse.Namespace, load: LoadConfig, client: ClientConfig, n_utterances: int
) -> dict[str, Any]:
    argv = ["harken", "loadtest", *sys.argv[2:]] if sys.argv[1:2] == ["loadtest"] else None
    return {
        "command": shlex.join(argv) if argv else "harken loadtest (called in-process)",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "url": ", ".join(args.url) or "servers started by --compare-policies",
        "serve_args": args.serve_args,
        "manifest": args.manifest,
        "manifest_utterances": n_utterances,
        "streams": list(load.streams),
        "seconds_per_level": load.seconds,
        "chunk_ms": client.chunk_ms,
        "speed": client.speed,
        "partials": client.partials,
        "seed": load.seed,
        "machine": machine(),
    }


def machine() -> dict[str, Any]:
    """The load generator's host (the server's too, when it runs on the same one)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
    }
