"""Price network shapes before training them: one table from `harken floor` reports.

    python models/results/big2/shapes/table.py models/results/big2/shapes/floor_*

Each argument is a `harken floor --out` directory. The table gives what a shape costs the
server's one model thread (fp32, 160 ms chunks, `ModelRunner.run_sync`), so a shape can be
ruled out for latency before hours of training are spent on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def cell(runs: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """The fp32, one-thread, 160 ms step at `batch` streams."""
    for r in runs:
        if (r["precision"], r["threads"], r["chunk_ms"], r["batch"]) == ("fp32", 1, 160, batch):
            return r
    raise SystemExit(f"no fp32 1-thread 160 ms batch-{batch} step in the report")


def row(report: Path) -> str:
    d = json.loads((report / "floor.json").read_text())
    one, sixteen = cell(d["runner"], 1), cell(d["runner"], 16)
    return (
        f"| {report.name} | {d['meta']['model']} | {d['flops']['total_per_audio_s'] / 1e6:.0f} "
        f"| {one['step_ms']:.1f} | {sixteen['step_ms']:.1f} "
        f"| {one['streams_one_thread']:.0f} | {sixteen['streams_one_thread']:.0f} |"
    )


def main(dirs: list[str]) -> None:
    lines = [
        "| report | network | MFLOP per audio s | ms a step, B=1 | ms a step, B=16 "
        "| streams one thread holds, B=1 | B=16 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        *(row(Path(p)) for p in dirs),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
