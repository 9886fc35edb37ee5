"""`harken compare`: is bundle B really better than bundle A on the same manifest?

Two `harken eval --out` reports of one manifest are paired utterance by utterance, and the
difference in corpus error rate (B minus A) is resampled over utterances (paired bootstrap).
A stage of training that moves a 394-clip dev set by a point can be noise: the interval
and the share of resamples where B is worse say how much to trust it before it replaces a
default model.

    harken eval --bundle models/default --manifest dev.jsonl --beam --out a.json
    harken eval --bundle runs/x/candidate --manifest dev.jsonl --beam --out b.json
    harken compare a.json b.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
# columns of a report's per-utterance rows
WORD_ERRORS, WORDS, CHAR_ERRORS, CHARS = range(4)


@dataclass(frozen=True)
class Comparison:
    """B minus A for one decoder and one unit (words or characters), in rate (0.01 = 1 point)."""

    decoder: str
    unit: str
    rate_a: float
    rate_b: float
    low: float  # 2.5th percentile of the resampled difference
    high: float  # 97.5th
    p_worse: float  # share of resamples where B's rate is higher
    better: int  # utterances with fewer errors under B
    worse: int

    @property
    def difference(self) -> float:
        return self.rate_b - self.rate_a


def paired_bootstrap(
    errors_a: I64, errors_b: I64, lengths: I64, rounds: int = 10000, seed: int = 0
) -> tuple[float, float, float]:
    """(low, high, p_worse) of rate(B) - rate(A) over `rounds` resamples of the utterances,
    each rate being total errors over total reference length of the resample."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(lengths), (rounds, len(lengths)))
    total = lengths[idx].sum(axis=1)
    diff = (errors_b[idx].sum(axis=1) - errors_a[idx].sum(axis=1)) / np.maximum(total, 1)
    low, high = np.percentile(diff, [2.5, 97.5])
    return float(low), float(high), float(np.mean(diff > 0))


def _rows(report: dict[str, Any], path: Path) -> dict[str, Any]:
    rows = report.get("per_utterance")
    if not isinstance(rows, dict) or "audio" not in rows:
        raise ValueError(
            f"{path}: no per-utterance rows; write it again with this version's `harken eval --out`"
        )
    return rows


def compare(
    a: dict[str, Any], b: dict[str, Any], paths: tuple[Path, Path], rounds: int, seed: int
) -> list[Comparison]:
    """Every decoder both reports share, in words and in characters."""
    rows_a, rows_b = _rows(a, paths[0]), _rows(b, paths[1])
    if rows_a["audio"] != rows_b["audio"]:
        raise ValueError(
            f"{paths[0]} and {paths[1]} score different utterances "
            f"({len(rows_a['audio'])} and {len(rows_b['audio'])}); pair reports of one manifest"
        )
    out = []
    for name in [n for n in rows_a if n != "audio" and n in rows_b]:
        ma, mb = np.asarray(rows_a[name], np.int64), np.asarray(rows_b[name], np.int64)
        if not np.array_equal(ma[:, [WORDS, CHARS]], mb[:, [WORDS, CHARS]]):
            raise ValueError(f"{name}: the references differ between the two reports")
        for unit, err, n in (("WER", WORD_ERRORS, WORDS), ("CER", CHAR_ERRORS, CHARS)):
            lengths = ma[:, n]
            low, high, p_worse = paired_bootstrap(ma[:, err], mb[:, err], lengths, rounds, seed)
            total = max(int(lengths.sum()), 1)
            out.append(
                Comparison(
                    decoder=name,
                    unit=unit,
                    rate_a=int(ma[:, err].sum()) / total,
                    rate_b=int(mb[:, err].sum()) / total,
                    low=low,
                    high=high,
                    p_worse=p_worse,
                    better=int(np.sum(mb[:, err] < ma[:, err])),
                    worse=int(np.sum(mb[:, err] > ma[:, err])),
                )
            )
    if not out:
        raise ValueError(f"{paths[0]} and {paths[1]} share no decoder")
    return out


def markdown(results: list[Comparison], paths: tuple[Path, Path], utterances: int) -> str:
    lines = [
        f"A: {paths[0]}; B: {paths[1]}; {utterances} utterances, paired bootstrap",
        "",
        "| decoder | rate | A | B | B - A | 95% interval | P(B worse) | utterances better / worse |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for c in results:
        lines.append(
            f"| {c.decoder} | {c.unit} | {100 * c.rate_a:.2f}% | {100 * c.rate_b:.2f}% | "
            f"{100 * c.difference:+.2f} | {100 * c.low:+.2f} to {100 * c.high:+.2f} | "
            f"{c.p_worse:.2f} | {c.better} / {c.worse} |"
        )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, help="`harken eval --out` report of the baseline")
    p.add_argument("b", type=Path, help="report of the candidate, on the same manifest")
    p.add_argument("--rounds", type=int, default=10000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="resampling seed")
    p.add_argument("--out", type=Path, help="write the Markdown table here too")


def main(args: argparse.Namespace) -> int:
    if args.rounds < 100:
        raise SystemExit("harken compare: error: --rounds must be at least 100")
    paths = (args.a, args.b)
    try:
        reports = [json.loads(p.read_text()) for p in paths]
        results = compare(reports[0], reports[1], paths, args.rounds, args.seed)
    except (OSError, json.JSONDecodeError, ValueError) as e:
        raise SystemExit(f"harken compare: error: {e}") from None
    text = markdown(results, paths, len(reports[0]["per_utterance"]["audio"]))
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0
