"""What a `harken prepare` run kept and dropped: counted as it goes, then printed and written
to `prepare_report.json`, so refused utterances are visible instead of silently missing."""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXAMPLES = 3  # examples kept per drop reason


@dataclass
class Report:
    """What was kept and what was dropped, by reason with a few examples."""

    dropped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    notes: dict[str, Any] = field(default_factory=dict)

    def drop(self, reason: str, example: str) -> None:
        self.dropped[reason] += 1
        if len(self.examples[reason]) < EXAMPLES:
            self.examples[reason].append(example[:160])


def write_report(out_dir: Path, args: argparse.Namespace, kept: dict[str, Any], r: Report) -> None:
    report = {
        "source": args.source,
        "input": str(args.input) if args.input else None,
        "kept": kept,
        "kept_utterances": sum(s["utterances"] for s in kept.values()),
        "kept_hours": round(sum(s["hours"] for s in kept.values()), 4),
        "dropped_utterances": sum(r.dropped.values()),
        "dropped": {
            reason: {"count": count, "examples": r.examples[reason]}
            for reason, count in r.dropped.most_common()
        },
    } | r.notes
    text = json.dumps(report, indent=2) + "\n"
    (out_dir / "prepare_report.json").write_text(text, encoding="utf-8")


def print_summary(source: str, kept: dict[str, Any], r: Report) -> None:
    n = sum(s["utterances"] for s in kept.values())
    hours = sum(s["hours"] for s in kept.values())
    parts = ", ".join(f"{k} {v['utterances']} ({v['hours']:.2f} h)" for k, v in kept.items())
    print(f"[prepare] {source}: kept {n} utterances, {hours:.2f} h: {parts}", flush=True)
    print(f"[prepare] dropped {sum(r.dropped.values())}", flush=True)
    for reason, count in r.dropped.most_common():
        print(f"[prepare]   {reason}: {count}, e.g. {'; '.join(r.examples[reason][:2])}")
