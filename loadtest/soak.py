"""`harken loadtest --soak`: hours under load, with nothing lost (issue 19).

    harken loadtest --soak --manifest M.jsonl --streams 32 --soak-minutes 30 \
        --serve-args="--max-streams 64" --note "idle machine" --out experiments/loadtest/soak
    harken loadtest --soak --url ws://HOST:PORT --server-pid PID --manifest M.jsonl ...

`--streams` clients run for the whole time, each streaming manifest utterances one after
another at real time, on the protocols of `--mix` in turn (client k speaks mix[k % len]):
`/v1/stream` (loadtest/client.py), `/vosk` and REST file uploads (loadtest/protocols.py),
and OpenAI's Realtime transcription at `/v1/realtime` (loadtest/realtime.py).
Every `--sample-s` the server's process tree is read from /proc (loadtest/procstats.py) and
its /metrics for `harken_active_streams`. Faults (loadtest/faults.py) come at set fractions
of the run, SIGTERM at its end. The report (loadtest/soak_report.py) goes to `--out`.

Without `--url` the soak starts its own server (`--serve-args`); with `--url`, process stats
need `--server-pid` of a server on this machine, and the kill and SIGTERM faults are skipped
without it (SIGTERM always is: the soak stops only servers it started).

Exit status: 0 when the targets hold, 1 when one does not (the report is still written),
2 for bad arguments or a server that would not start.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadtest.client import ClientConfig, Utterance
from loadtest.faults import (
    FAULTS,
    FaultSettings,
    Live,
    Order,
    inject,
    metric,
    metrics,
    run_fault,
)
from loadtest.host import machine
from loadtest.launch import LaunchError, launched_server
from loadtest.manifest import load_manifest
from loadtest.misbehave import stall, vanish
from loadtest.procstats import PROC, read_tree
from loadtest.protocols import recorded, sleep_until, upload
from loadtest.records import PROTOCOLS, FaultEvent, Record
from loadtest.soak_report import SoakRun, write_soak_report
from loadtest.sweep import LIVE

FAILURE_BACKOFF_S = 0.5  # a client waits this long after a failure before its next try
SERVER_MAX_STREAMS = 64  # harken serve's default --max-streams


@dataclass(frozen=True)
class SoakConfig:
    minutes: float  # load time
    streams: int  # concurrent load clients
    mix: tuple[str, ...]  # protocol of client k: mix[k % len(mix)]
    sample_s: float  # seconds between process samples
    window_s: float  # latency percentiles per window of this length
    faults: tuple[str, ...]  # among FAULTS
    fault_window_s: float  # seconds either side of a fault that count as near it
    margin: tuple[float, float]  # latency drift allowed: (fraction, ms)
    offset_s: float  # each client starts after a random delay in [0, offset_s)
    seed: int
    progress: bool  # a line per sample on stderr


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("soak (--soak): one load for a long time, with faults")
    group.add_argument("--soak", action="store_true", help="run a soak instead of a sweep")
    group.add_argument("--soak-minutes", type=float, default=30.0, help="load time")
    group.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    group.add_argument("--mix", default="stream,vosk,rest", help=f"protocols among {PROTOCOLS}")
    group.add_argument("--server-pid", type=int, help="with --url: the server's pid, if local")
    group.add_argument(
        "--faults", default=",".join(FAULTS), help=f"among {FAULTS}, or 'none'; comma-separated"
    )
    group.add_argument("--fault-window-s", type=float, default=30.0, help="'near a fault', s")
    group.add_argument("--burst", type=int, default=0, help="0: 3 x the server's --max-streams")
    # a stalled client is dropped once the server's send buffer fills and a send then waits
    # --send-timeout-s (10 s): 24-30 s after the stall in the soaks recorded; 30 s missed one
    group.add_argument("--stall-wait-s", type=float, default=60.0, help="longest a stall lasts")
    group.add_argument("--window-s", type=float, default=60.0, help="latency percentile windows")
    group.add_argument("--margin-pct", type=float, default=25.0, help="latency drift allowed, %%")
    group.add_argument("--margin-ms", type=float, default=10.0, help="latency drift allowed, ms")
    group.add_argument("--note", default="", help="what else ran on the machine")


def main(args: argparse.Namespace) -> int:
    try:
        soak, client = configure(args)
        utterances = load_manifest(Path(args.manifest), args.limit, args.max_utterance_s)
        serve_args = server_args(args, utterances, client)
        settings = fault_settings(args, serve_args)
    except ValueError as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        with target(args, serve_args, out) as (url, pid, process):
            run = asyncio.run(
                soak_run(soak, replace(client, url=url), utterances, settings, pid, process)
            )
    except LaunchError as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    meta = _meta(args, soak, serve_args, pid, len(utterances))
    summary = write_soak_report(out, run, meta)
    print(f"report: {out / 'soak.md'}", file=sys.stderr)
    return 0 if summary["passed"] else 1


# -- arguments ------------------------------------------------------------------------------


def configure(args: argparse.Namespace) -> tuple[SoakConfig, ClientConfig]:
    """The soak's settings from the command line; ValueError says what to change."""
    _check_target(args)
    streams = _one_int(args.streams)
    mix = _names(args.mix, PROTOCOLS, "--mix")
    faults = () if args.faults.strip() == "none" else _names(args.faults, FAULTS, "--faults")
    for flag in ("soak_minutes", "sample_s", "window_s", "stall_wait_s"):
        if not getattr(args, flag) > 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be > 0")
    if args.sample_s >= args.soak_minutes * 60:
        raise ValueError("--sample-s must be shorter than the soak (--soak-minutes)")
    if min(args.fault_window_s, args.offset_s, args.margin_pct, args.margin_ms, args.burst) < 0:
        raise ValueError("--fault-window-s, --offset-s, --margin-* and --burst must be >= 0")
    client = ClientConfig.from_args(args)
    margin = (args.margin_pct / 100, args.margin_ms)
    soak = SoakConfig(
        args.soak_minutes,
        streams,
        mix,
        args.sample_s,
        args.window_s,
        faults,
        args.fault_window_s,
        margin,
        args.offset_s,
        args.seed,
        args.progress_s > 0,
    )
    return soak, client


def _check_target(args: argparse.Namespace) -> None:
    if args.compare_policies:
        raise ValueError("--soak and --compare-policies are separate runs; give one")
    if len(args.url) > 1:
        raise ValueError("--soak runs against one server: give --url once")
    if args.server_pid is not None:
        if not args.url:
            raise ValueError("--server-pid goes with --url (a server the soak starts is known)")
        if not (PROC / str(args.server_pid)).is_dir():
            raise ValueError(f"--server-pid {args.server_pid}: no such process on this machine")
    if args.url and args.serve_args:
        raise ValueError("--serve-args is for a server the soak starts; drop it or --url")


def _one_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"--soak takes one --streams value, the concurrency (e.g. --streams 32), got {text!r}"
        ) from None
    if value < 1:
        raise ValueError(f"--streams must be >= 1, got {value}")
    return value


def _names(text: str, allowed: tuple[str, ...], flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(set(names) - set(allowed))
    if not names or unknown:
        raise ValueError(f"{flag} takes names among {', '.join(allowed)}; got {text!r}")
    return names


def _flag(serve_args: list[str], name: str) -> str | None:
    """The last value of `--name V` or `--name=V` in a server command line."""
    value = None
    for i, arg in enumerate(serve_args):
        if arg == name and i + 1 < len(serve_args):
            value = serve_args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def server_args(
    args: argparse.Namespace, utterances: list[Utterance], client: ClientConfig
) -> list[str]:
    """`--serve-args` split, with a shutdown grace long enough for any stream in flight at
    the SIGTERM (the longest utterance and its final) unless one is given."""
    serve = shlex.split(args.serve_args)
    if not args.url and _flag(serve, "--shutdown-grace-s") is None:
        longest = max(u.duration for u in utterances) / client.speed
        serve += ["--shutdown-grace-s", f"{longest + client.final_timeout_s + 5:.0f}"]
    return serve


def fault_settings(args: argparse.Namespace, serve_args: list[str]) -> FaultSettings:
    try:
        max_streams = int(_flag(serve_args, "--max-streams") or SERVER_MAX_STREAMS)
        grace = float(_flag(serve_args, "--shutdown-grace-s") or 10.0)
    except ValueError:
        raise ValueError(
            "--serve-args: --max-streams and --shutdown-grace-s take numbers"
        ) from None
    return FaultSettings(args.burst or 3 * max_streams, args.stall_wait_s, grace)


@contextmanager
def target(
    args: argparse.Namespace, serve_args: list[str], out: Path
) -> Iterator[tuple[str, int | None, subprocess.Popen[str] | None]]:
    """(ws:// URL, server pid or None, process or None) for the block: the given server,
    or one started for it."""
    if args.url:
        yield args.url[0], args.server_pid, None
        return
    with launched_server("eager", serve_args, out / "server.log") as server:
        yield server.url, server.pid, server.process


# -- the run --------------------------------------------------------------------------------


async def soak_run(
    soak: SoakConfig,
    client: ClientConfig,
    utterances: list[Utterance],
    settings: FaultSettings,
    pid: int | None,
    process: subprocess.Popen[str] | None,
) -> SoakRun:
    """The clients, the sampler and the faults for `soak.minutes`, then the end (SIGTERM
    with streams in flight when that fault is on and the server is ours)."""
    live = Live(client, utterances, soak.streams, pid, process)
    duration = soak.minutes * 60
    samples: list[dict[str, Any]] = []
    rest_clients = sum(soak.mix[k % len(soak.mix)] == "rest" for k in range(soak.streams))
    with ThreadPoolExecutor(max(1, rest_clients)) as pool:
        clients = [asyncio.create_task(_client(live, soak, k, pool)) for k in range(soak.streams)]
        sampler = asyncio.create_task(_sampler(live, soak, samples))
        faults = asyncio.create_task(inject(live, soak.faults, duration, settings))
        await sleep_until(live.t0 + duration)
        live.stopping = True
        sampler.cancel()
        samples.append(await sample(live))
        events = await _end(live, soak, settings, faults, clients)
    notes = _notes(pid, soak, events)
    return SoakRun(
        duration,
        live.records,
        samples,
        events,
        soak.window_s,
        soak.fault_window_s,
        soak.margin,
        notes,
    )


async def _end(
    live: Live,
    soak: SoakConfig,
    settings: FaultSettings,
    faults: asyncio.Task[None],
    clients: list[asyncio.Task[None]],
) -> list[FaultEvent]:
    """SIGTERM if asked, while the clients finish what they have in flight; the faults."""
    term = asyncio.create_task(run_fault(live, "term", settings)) if "term" in soak.faults else None
    longest = max(u.duration for u in live.utterances) / live.client.speed
    bound = longest + live.client.connect_timeout_s + live.client.final_timeout_s + 10
    _, pending = await asyncio.wait(clients, timeout=bound + settings.stall_wait_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    # a fault still under way (a short soak): its clients have stopped, so it ends soon
    await asyncio.wait([faults], timeout=bound)
    faults.cancel()
    if term is not None:
        await term
    return sorted(live.events, key=lambda e: e.start_s)


def _notes(pid: int | None, soak: SoakConfig, events: list[FaultEvent]) -> list[str]:
    notes = []
    if pid is None:
        notes.append("no server pid (give --server-pid with --url): process stats not sampled")
    missing = [f for f in soak.faults if f not in {e.name for e in events}]
    if missing:
        notes.append(f"faults that did not run before the end: {', '.join(missing)}")
    return notes


async def _client(live: Live, soak: SoakConfig, k: int, pool: ThreadPoolExecutor) -> None:
    """Load client k: utterances back to back until the soak stops, or a misbehaviour when
    a fault has ordered one."""
    rng = random.Random(soak.seed * 1_000_003 + k)
    protocol = soak.mix[k % len(soak.mix)]
    await asyncio.sleep(rng.uniform(0, soak.offset_s))
    index = rng.randrange(len(live.utterances))
    while not live.stopping:
        utt = live.utterances[index % len(live.utterances)]
        index += 1
        order = live.orders.pop(k, None)
        if order is not None:
            try:
                await _misbehave(live, k, order, utt)
            finally:
                if not order.done.done():
                    order.done.cancel()
            continue
        record = await _one(live, k, protocol, utt, pool)
        if record is not None and not record.ok:
            await asyncio.sleep(FAILURE_BACKOFF_S)
    order = live.orders.pop(k, None)
    if order is not None:  # ordered too late: the soak is over
        order.done.cancel()


async def _one(
    live: Live, k: int, protocol: str, utt: Utterance, pool: ThreadPoolExecutor
) -> Record | None:
    if protocol == "rest":
        result = await recorded(live.client, utt)
        if live.stopping:
            return None  # the soak ended while it "recorded": nothing was sent
        with live.opened():
            await upload(live.client, utt, pool, result)
    else:
        speak = LIVE[protocol]
        with live.opened():
            result = await speak(live.client, utt)
    return live.add(result, k, protocol, "load", utt.name)


async def _misbehave(live: Live, k: int, order: Order, utt: Utterance) -> None:
    with live.opened():
        if order.kind == "vanish":
            result, protocol = await vanish(live.client, utt), "stream"
        else:
            longest = max(live.utterances, key=lambda u: u.duration)
            result, protocol = await stall(live.client, longest, order.wait_s), "vosk"
    if not order.done.done():
        order.done.set_result(live.add(result, k, protocol, order.kind, utt.name))


# -- samples --------------------------------------------------------------------------------


async def _sampler(live: Live, soak: SoakConfig, samples: list[dict[str, Any]]) -> None:
    for n in range(10**9):
        await sleep_until(live.t0 + n * soak.sample_s)
        samples.append(await sample(live))
        if soak.progress:
            print(progress_line(live, samples[-1], soak), file=sys.stderr, flush=True)


async def sample(live: Live) -> dict[str, Any]:
    """One sample: the load generator's CPU and open streams, /metrics' active streams, and
    (with a server pid) the process tree."""
    row: dict[str, Any] = {
        "t_s": live.now(),
        "loadgen_cpu_s": round(time.process_time(), 3),
        "client_open": live.open_streams,
        "active_streams": metric(await metrics(live), "harken_active_streams"),
    }
    if live.pid is not None:
        try:
            row.update(tree_fields(await asyncio.to_thread(read_tree, live.pid)))
        except ProcessLookupError:
            row["server_gone"] = True
    return row


def tree_fields(tree: Any) -> dict[str, Any]:
    return {
        "rss_kb": int(tree.total("rss_kb")),
        "server_rss_kb": tree.server.rss_kb,
        "children_rss_kb": int(sum(p.rss_kb for p in tree.children)),
        "fds": int(tree.total("fds")),
        "threads": int(tree.total("threads")),
        "children": len(tree.children),
        "decoders": len(tree.decoders),
        "server_cpu_s": round(tree.total("cpu_s"), 2),
        "processes": [
            {
                "pid": p.pid,
                "role": p.role,
                "rss_kb": p.rss_kb,
                "fds": p.fds,
                "threads": p.threads,
                "cpu_s": round(p.cpu_s, 2),
            }
            for p in tree.processes
        ],
    }


def progress_line(live: Live, row: dict[str, Any], soak: SoakConfig) -> str:
    done = [r for r in live.records if r.tag == "load"]
    failed = sum(not r.ok for r in done)
    line = f"[soak {row['t_s']:7.1f}/{soak.minutes * 60:g} s] streams {len(done)} failed {failed}"
    if "rss_kb" in row:
        line += f"  rss {row['rss_kb'] / 1024:.0f} MiB fds {row['fds']} threads {row['threads']}"
        line += f" children {row['children']}"
    return line + f"  active {row['active_streams']} open {row['client_open']}"


def _meta(
    args: argparse.Namespace,
    soak: SoakConfig,
    serve_args: list[str],
    pid: int | None,
    n_utterances: int,
) -> dict[str, Any]:
    argv = ["harken", "loadtest", *sys.argv[2:]] if sys.argv[1:2] == ["loadtest"] else None
    return {
        "command": shlex.join(argv) if argv else "harken loadtest --soak (called in-process)",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "server": args.url[0]
        if args.url
        else "started by the soak: harken serve " + shlex.join(serve_args),
        "server_pid": pid,
        "manifest": args.manifest,
        "manifest_utterances": n_utterances,
        "streams": soak.streams,
        "minutes": soak.minutes,
        "mix": ",".join(soak.mix),
        "faults": ",".join(soak.faults) or "none",
        "chunk_ms": args.chunk_ms,
        "sample_s": soak.sample_s,
        "note": args.note or "(none given)",
        "machine": machine(),
    }
