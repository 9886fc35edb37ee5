"""`harken prepare`: corpora that people already have, turned into harken manifests.

Eight sources: LibriSpeech, Common Voice, a Kaldi data directory, a plain CSV/TSV, the
Asterisk English prompts that Debian packages, the acted speech of two free games in Debian
main, labelled from their scripts, and the voice packs of five more Debian packages (readers
in `corpus.importers`). Every transcript goes through `corpus.text.normalise`, so imported
text follows the same conventions as synthesised text; what it refuses, and audio that cannot
be read, is counted by reason in `prepare_report.json` instead of aborting the run or entering
a manifest with a wrong transcript. Audio becomes 16 kHz mono 16-bit WAV under `OUT/audio/`; WAVs already there are
reused, so a run that was interrupted resumes (delete OUT to rebuild from changed sources).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus.importers import asterisk, games, layouts, packs
from corpus.importers.audio import Outcome, convert_all, recordings
from corpus.importers.candidates import Candidate, Item, PrepareError, normalise_all
from corpus.importers.report import Report, print_summary, write_report
from models.manifest import Utterance, write_manifest

READERS: dict[str, Callable[[argparse.Namespace, Report], list[Candidate]]] = {
    "librispeech": layouts.read_librispeech,
    "commonvoice": layouts.read_commonvoice,
    "kaldi": layouts.read_kaldi,
    "csv": layouts.read_csv,
    "asterisk": asterisk.read_asterisk,
    "queen": games.read_queen,
    "sky": games.read_sky,
    "packs": packs.read_packs,
}
SOURCES = tuple(READERS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        choices=SOURCES,
        help="layout of the input corpus: LibriSpeech, Common Voice, Kaldi data dir, CSV/TSV, "
        "Debian's Asterisk English prompts, or the acted speech of Debian's games Flight of the "
        "Amazon Queen (queen) and Beneath a Steel Sky (sky), labelled from their scripts, or "
        "the voice packs of hedgewars-data, megaglest-data, klettres-data, ktuberling-data and "
        "codec2-examples (packs)",
    )
    parser.add_argument(
        "--input",
        type=Path,
        help="librispeech: root dir; commonvoice: the TSV; kaldi: data dir; csv: the file; "
        f"asterisk: sounds dir (default {asterisk.SOUNDS}); queen: queen.1c; sky: the dir of "
        "sky.dnr and sky.dsk; packs: the dir of the <package>/ dirs that make setup-synth "
        f"unpacks (default: where apt installs each, else {packs.PACKS_DIR})",
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--limit", type=int, default=0, help="first N usable utterances (0: all)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="decoding processes (default 2); packs: also the recogniser's threads",
    )
    parser.add_argument(
        "--split", help="manifest name (default: train/dev/test from the input's name, else all)"
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        default=asterisk.TRANSCRIPTS,
        help="asterisk: core-sounds-en.txt(.gz)",
    )
    parser.add_argument(
        "--test-prompts", type=int, default=asterisk.TEST_PROMPTS, help="asterisk: test size"
    )
    parser.add_argument(
        "--dev-prompts", type=int, default=asterisk.DEV_PROMPTS, help="asterisk: dev size"
    )
    parser.add_argument(
        "--hypotheses",
        type=Path,
        help="queen, sky, packs: an earlier run's OUT/hypotheses.jsonl (or .jsonl.gz); its "
        "clips are labelled from it instead of being heard by Whisper again",
    )
    parser.add_argument(
        "--test-minutes",
        type=float,
        default=games.TEST_MINUTES,
        help="queen: the test split holds whole characters until it has this many minutes",
    )
    parser.add_argument(
        "--test-voices",
        type=int,
        default=games.TEST_VOICES,
        help="queen: ... and at least this many characters",
    )


def main(args: argparse.Namespace) -> int:
    try:
        return prepare(args)
    except PrepareError as e:
        print(f"harken prepare: error: {e}", file=sys.stderr)
        return 2


def prepare(args: argparse.Namespace) -> int:
    """Read, normalise, convert, then write manifests, `prepare_report.json` and a summary."""
    _check_arguments(args)
    report = Report()
    items = _usable_items(args, report)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PrepareError(f"cannot create --out {args.out}: {e}") from None
    outcomes = convert_all(args.out, recordings(items), args.workers)
    always = ("train", "dev", "test") if args.source in ("asterisk", "queen", "packs") else ()
    kept = write_outputs(args.out, items, outcomes, report, always)
    if args.source == "packs":
        packs.note_sources(args.out, report)
    write_report(args.out, args, kept, report)
    if args.source == "asterisk":
        asterisk.write_readme(args.out, kept, report)
    print_summary(args.source, kept, report)
    return 0


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse what argparse lets through, before any input is read."""
    if args.limit < 0 or args.workers < 1:
        raise PrepareError("--limit must be >= 0 and --workers >= 1")
    if args.test_minutes < 0 or args.test_voices < 0:
        raise PrepareError("--test-minutes and --test-voices must be >= 0")
    if args.split is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", args.split):
        raise PrepareError(f"--split {args.split!r}: use letters, digits, '-' and '_'")
    if args.out.exists() and not args.out.is_dir():
        raise PrepareError(f"--out {args.out} is a file, not a directory")
    seed = args.hypotheses
    if seed is not None:
        if args.source not in ("queen", "sky", "packs"):
            raise PrepareError(f"--hypotheses is for queen, sky and packs, not {args.source}")
        if not seed.is_file():
            raise PrepareError(f"--hypotheses {seed} is not a file")


def _usable_items(args: argparse.Namespace, report: Report) -> list[Item]:
    """The source's utterances whose text normalised, with their splits, up to `--limit`."""
    try:
        cands = READERS[args.source](args, report)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise PrepareError(f"cannot read {args.input}: {e}") from None
    items = normalise_all(cands, report)
    if args.source == "asterisk":
        items = asterisk.assign_splits(items, args.test_prompts, args.dev_prompts, report)
    if not items:
        reasons = ", ".join(f"{k} {v}" for k, v in report.dropped.most_common())
        raise PrepareError(f"no usable utterances in {args.input} (dropped: {reasons or 'none'})")
    return items[: args.limit] if args.limit else items


def write_outputs(
    out_dir: Path,
    items: list[Item],
    outcomes: list[Outcome],
    report: Report,
    always: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """Manifests per split (and `always` ones, even empty) in source order; audio failures
    counted in the report. Returns each split's counts for the report and summary."""
    by_index = {i.index: i for i in items}
    rows: dict[str, list[Utterance]] = defaultdict(list)
    for index, duration, reason, detail in sorted(outcomes, key=lambda o: o[0]):
        item = by_index[index]
        if duration is None:
            report.drop(f"audio:{reason}", f"{item.cand.key}: {detail}")
            continue
        utt = Utterance(out_dir / item.cand.out, item.text, duration, item.cand.voice)
        rows[item.cand.split].append(utt)
    splits = sorted({i.cand.split for i in items} | set(rows) | set(always))
    summary = {}
    for split in splits:
        write_manifest(out_dir / f"{split}.jsonl", rows[split])
        seconds = sum(u.duration or 0.0 for u in rows[split])
        summary[split] = {
            "utterances": len(rows[split]),
            "hours": round(seconds / 3600, 4),
            "voices": len({u.voice for u in rows[split] if u.voice}),
        }
    return summary
