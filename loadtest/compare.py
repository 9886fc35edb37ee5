"""`--compare-policies`: the same sweep against several servers (given URLs, or servers
started per Batch Dispatch policy), then the most streams each sustains under a p98 bound
and their ratios."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadtest.client import ClientConfig, Utterance
from loadtest.launch import LaunchError, launched
from loadtest.report import details, write_comparison, write_report
from loadtest.sweep import LoadConfig, say, sweep

POLICIES = ("eager", "timeout", "none")  # server/dispatch.py's, kept equal by a test


def compare(
    args: argparse.Namespace,
    load: LoadConfig,
    client: ClientConfig,
    utterances: list[Utterance],
    out: Path,
    meta: dict[str, Any],
) -> int:
    """Each server in turn (given URLs, or servers started per policy), then the ratios."""
    bounds = parse_bounds(args.bound_ms)
    stop_over = 0.0 if args.full_sweep else max(bounds)
    runs: dict[str, list[dict[str, Any]]] = {}
    levels: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, url in _targets(args):
            say(f"== {name} ==")
            with url as ws_url:
                swept = asyncio.run(sweep(load, replace(client, url=ws_url), utterances, stop_over))
            runs[name] = write_report(out / name, swept, {**meta, "run": name, "url": ws_url})
            # the levels' summaries; every utterance is in the run's own details.json
            levels[name] = [
                {k: v for k, v in details(level).items() if k != "utterances"} for level in swept
            ]
    except (LaunchError, ValueError) as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    comparison = write_comparison(out, runs, bounds, meta, levels)
    for bound, at_bound in comparison["by_bound"].items():
        for name, n in at_bound["sustained_streams"].items():
            say(f"{name}: sustains {n} streams with p98 <= {bound} ms")
        for ratio, value in at_bound["ratios"].items():
            say(f"{ratio} at {bound} ms: {value}")
    say(f"report: {out / 'compare.md'}")
    return 0


def parse_bounds(text: str | float) -> list[float]:
    """`--bound-ms 100,200` -> [100.0, 200.0]; the largest also ends a sweep early."""
    try:
        bounds = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--bound-ms takes comma-separated milliseconds, got {text!r}") from None
    if not bounds or min(bounds) <= 0:
        raise ValueError(f"--bound-ms needs positive milliseconds, got {text!r}")
    return bounds


def _targets(args: argparse.Namespace) -> list[tuple[str, AbstractContextManager[str]]]:
    """(name, context manager yielding a ws:// URL) per server to measure."""
    if args.url:
        labels = [s for s in args.labels.split(",") if s] or [f"server{i}" for i in range(1, 99)]
        if len(labels) < len(args.url):
            raise ValueError(f"--labels names {len(labels)} servers, --url gives {len(args.url)}")
        return [(label, nullcontext(url)) for label, url in zip(labels, args.url, strict=False)]
    policies = [p for p in args.policies.split(",") if p]
    unknown = set(policies) - set(POLICIES)
    if unknown:
        raise ValueError(f"--policies must be among {POLICIES}, got {sorted(unknown)}")
    serve_args = shlex.split(args.serve_args)
    log_dir = Path(args.out)
    # each server starts only when its turn comes, and stops before the next one starts
    return [(p, launched(p, serve_args, log_dir / p / "server.log")) for p in policies]
