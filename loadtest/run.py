"""`harken loadtest`: concurrent real-time streams against a server, swept over concurrency.

    harken loadtest --url ws://HOST:PORT --manifest M.jsonl --streams 1,2,5,10,20 \
        --seconds 60 --out DIR
    harken loadtest --compare-policies --manifest M.jsonl --out DIR [--serve-args "..."]
    harken loadtest --compare-policies --url ws://A --url ws://B --labels eager,none ...
    harken loadtest --soak --manifest M.jsonl --streams 32 --soak-minutes 30 ... (loadtest/soak.py)
    harken loadtest --profile --manifest M.jsonl --streams 20 --seconds 30 ... (loadtest/profile.py)

At each concurrency N, N clients each stream manifest utterances one after another, paced
at real time x `--speed`, each starting after a random offset at a random utterance. A
client starts no new utterance after `--seconds`, and makes at most a bounded number, so
every level ends by itself (loadtest/sweep.py). The server's /metrics is read before and
after each level for its batch sizes. Traffic goes
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
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from loadtest import profile, soak
from loadtest.client import LIVE_PROTOCOLS, MAX_CHUNK_MS, MIN_CHUNK_MS, ClientConfig, Utterance
from loadtest.compare import POLICIES, compare, parse_bounds
from loadtest.host import machine
from loadtest.manifest import load_manifest
from loadtest.report import write_report
from loadtest.sweep import LoadConfig, sweep


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
    parser.add_argument(
        "--protocol",
        choices=LIVE_PROTOCOLS,
        default="stream",
        help="what the clients speak: /v1/stream, /vosk, or OpenAI's Realtime at /v1/realtime",
    )
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
    group.add_argument(
        "--bound-ms", default="100,200", help="p98 bounds, ms; the largest ends a sweep"
    )
    group.add_argument("--serve-args", default="", help="extra `harken serve` flags, one string")
    group.add_argument(
        "--full-sweep", action="store_true", help="keep going past the first level over the bound"
    )
    soak.add_arguments(parser)
    profile.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if args.soak:
        return soak.main(args)
    if args.profile:
        return profile.main(args)
    try:
        load, client, utterances = _configure(args)
    except ValueError as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    meta = _meta(args, load, client, len(utterances))
    out = Path(args.out)
    if args.compare_policies:
        return compare(args, load, client, utterances, out, meta)
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
    parse_bounds(args.bound_ms)
    if args.seconds <= 0 or args.offset_s < 0 or args.pause_s < 0:
        raise ValueError("--seconds must be > 0; --offset-s and --pause-s >= 0")
    client = ClientConfig.from_args(args)
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
        "protocol": client.protocol,
        "seed": load.seed,
        "machine": machine(),
    }
