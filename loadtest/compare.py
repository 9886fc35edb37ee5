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
from loadtest.report import write_comparison, write_report
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
    stop_over = 0.0 if args.full_sweep else args.bound_ms
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, url in _targets(args):
            say(f"== {name} ==")
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
        say(f"{name}: sustains {n} streams with p98 <= {args.bound_ms:g} ms")
    for ratio, value in comparison["ratios"].items():
        say(f"{ratio}: {value}")
    say(f"report: {out / 'compare.md'}")
    return 0


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
