"""`harken prepare packs`: real recorded English from five more packages of Debian main (issue
81), beside the two games of `corpus.importers.games`: Hedgewars' hedgehog voices, MegaGlest's
unit answers, KDE's spoken letters and words (KLettres, KTuberling) and codec2's speech samples.

One command for all of them: each is minutes, not hours, and after its layout (`hedgewars`,
`megaglest`, `kde_words`, `codec2`) they are treated alike. `--input` is a directory holding
each package's data as `make setup-synth` unpacks it (`<package>/`, default .venv/packs);
without it, a package that apt installed is read where Debian puts it.

Labels: where a file name is the text (KLettres, KTuberling) it is the label, and the
recogniser only checks it (`name_vs_hypothesis` in the report); elsewhere a confident Whisper
hypothesis is a pseudo-label (`script_labels.label` with no script), cached in
`OUT/hypotheses.jsonl` as for the games. Splits move whole voices, package by package: in the
order of a hash of their names, `HELD_SHARE` of a package's voices (at least one) go to test and
as many to dev, when it has `MIN_VOICES`; the rest, and smaller packages, train. Held-out voices
keep their pseudo-labels, since these packages have no others: their dev and test measure
agreement with Whisper tiny.en, not the truth, and `labels.jsonl` says which label is which.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus.importers import codec2, hedgewars, kde_words, megaglest
from corpus.importers.candidates import Candidate, PrepareError
from corpus.importers.games import voice_splits
from corpus.importers.pack_clips import PackClip, drop
from corpus.importers.report import Report
from corpus.importers.script_labels import (
    Hypothesis,
    Label,
    Transcriber,
    agreement,
    edit_distance,
    hypotheses,
    label,
    label_columns,
    whisper_transcriber,
    write_atomic,
)
from corpus.text import Dropped, normalise
from models.manifest import read_manifest

PACKS_DIR = Path(__file__).resolve().parents[2] / ".venv" / "packs"
HELD_SHARE = 0.1  # of a package's voices, each to test and to dev
MIN_VOICES = 3  # a package with fewer stays in train: one voice held out would leave too few
SPLITS = ("train", "dev", "test")

Reader = Callable[[Path, Path, Report], list[PackClip]]  # (data dir, OUT, report)


@dataclass(frozen=True)
class Package:
    """A Debian package and the part of it that is read."""

    name: str
    version: str
    licence: str  # of the files read, from the package's copyright file
    installed: Path  # where apt installs that part
    read: Reader


PACKAGES = (
    Package(
        "hedgewars-data",
        "1.0.2-6",
        "GFDL-1.3 (Data/Sounds/*, Andrey Korotaev; the game GPL-2)",
        hedgewars.VOICES_DIR,
        hedgewars.read,
    ),
    Package(
        "megaglest-data",
        "3.13.0-3",
        "CC-BY-SA-3.0 (the Glest and MegaGlest teams, Titus Tscharntke and others)",
        megaglest.TECHS_DIR,
        megaglest.read,
    ),
    Package(
        "klettres-data",
        "4:22.12.3-1",
        "GPL-2+ (Anne-Marie Mahfouf and others)",
        kde_words.KLETTRES_DIR,
        kde_words.read_klettres,
    ),
    Package(
        "ktuberling-data",
        "4:22.12.3-1",
        "GPL-2+ (Albert Astals Cid and others)",
        kde_words.KTUBERLING_DIR,
        kde_words.read_ktuberling,
    ),
    Package(
        "codec2-examples",
        "1.0.5-1",
        "LGPL-2.1 (David Rowe)",
        codec2.RAW_DIR,
        codec2.read,
    ),
)


def read_packs(
    args: argparse.Namespace, report: Report, transcriber: Transcriber | None = None
) -> list[Candidate]:
    """Every package's clips, heard, labelled and split; what is lost is counted by reason."""
    clips: list[PackClip] = []
    for pkg in PACKAGES:
        data = data_dir(pkg, args.input)
        if not data.is_dir():
            raise PrepareError(
                f"{data} is missing: install Debian's {pkg.name} (make setup-synth unpacks it "
                "into .venv/packs), or give --input DIR holding <package>/ directories"
            )
        got = pkg.read(data, args.out, report)
        _tally(report, _source(got[0].key))["clips"] = len(got)
        _note_package(report, pkg, data, args.out)
        clips += got
    clips = clips[: args.limit] if args.limit else clips
    heard = hypotheses(
        {c.key: str(c.path) for c in clips},
        args.out / "hypotheses.jsonl",
        (lambda: transcriber) if transcriber else lambda: whisper_transcriber(threads=args.workers),
        args.hypotheses,
    )
    labels: dict[str, Label] = {}
    for c in clips:
        got_label = name_label(c, heard[c.key]) if c.text is not None else label(heard[c.key], None)
        if isinstance(got_label, str):
            drop(report, _source(c.key), got_label, f"{c.key}: {heard[c.key].text!r}")
        else:
            labels[c.key] = got_label
    plan = split_voices([c for c in clips if c.key in labels])
    out = []
    for c in clips:
        if c.key in labels:
            source = _source(c.key)
            split = plan[c.voice]
            wav = f"audio/{source}/{c.key}.wav"
            out.append(Candidate(c.key, labels[c.key].text, str(c.path.resolve()), wav, c.voice,
                                 split=split))  # fmt: skip
            _tally(report, source)["labelled"] = _tally(report, source).get("labelled", 0) + 1
    _write_labels(args.out, clips, heard, labels, plan)
    report.notes["labels"] = dict(Counter(lab.kind for lab in labels.values()))
    if (named := agreement(labels.values(), "name")) is not None:
        report.notes["name_vs_hypothesis"] = named
    report.notes["splits_by_voice"] = {
        s: sorted(v for v in plan if plan[v] == s) for s in ("dev", "test")
    }
    return out


def data_dir(pkg: Package, root: Path | None) -> Path:
    """`root/<package>` when given; else where apt installs it, or where setup unpacks it."""
    if root is not None:
        return root / pkg.name
    return pkg.installed if pkg.installed.is_dir() else PACKS_DIR / pkg.name


def name_label(clip: PackClip, hyp: Hypothesis) -> Label:
    """The file name's text, with the recogniser's word errors against it (only noted)."""
    text = clip.text or ""
    try:
        words = normalise(text).text.split()
    except Dropped:
        return Label(text, "name", 1.0)  # normalise_all counts the drop
    return Label(text, "name", edit_distance(hyp.text.split(), words) / max(len(words), 1))


def held_voices(voices: int) -> int:
    """How many voices a package gives test, and dev: none below `MIN_VOICES`."""
    return 0 if voices < MIN_VOICES else max(1, round(HELD_SHARE * voices))


def split_voices(clips: list[PackClip]) -> dict[str, str]:
    """Voice -> split, package by package (`games.voice_splits` on each, by voice count)."""
    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c in clips:
        seconds[_source(c.key)][c.voice] += c.seconds
    plan: dict[str, str] = {}
    for per_voice in seconds.values():
        n = held_voices(len(per_voice))
        plan |= voice_splits(dict(per_voice), 0.0, n, 0.0, n)
    return plan


def note_sources(out_dir: Path, report: Report) -> None:
    """Per package, what the manifests hold by split (utterances, hours, voices), and how many
    labelled clips normalising or converting lost; `prepare` calls this once they are written."""
    for split in SPLITS:
        path = out_dir / f"{split}.jsonl"
        rows = read_manifest(path) if path.is_file() else []
        by_source: dict[str, list[Any]] = defaultdict(list)
        for u in rows:
            by_source[(u.voice or "unknown:").split(":")[0]].append(u)
        for source, utts in by_source.items():
            _tally(report, source).setdefault("splits", {})[split] = {
                "utterances": len(utts),
                "hours": round(sum(u.duration or 0.0 for u in utts) / 3600, 4),
                "voices": sorted({u.voice for u in utts}),
            }
    for tally in report.notes.get("by_source", {}).values():
        written = sum(s["utterances"] for s in tally.get("splits", {}).values())
        tally["lost_after_labelling"] = tally.get("labelled", 0) - written


def _source(key: str) -> str:
    return key.split("-", 1)[0]


def _tally(report: Report, source: str) -> dict[str, Any]:
    by_source: dict[str, dict[str, Any]] = report.notes.setdefault("by_source", {})
    return by_source.setdefault(source, {})


def _note_package(report: Report, pkg: Package, data: Path, out_dir: Path) -> None:
    """The package, version and licence in the report, and its copyright file copied to
    OUT/licences (from beside the unpacked data, or where apt puts it)."""
    copyright_file = None
    for candidate in (data.parent / f"{pkg.name}.copyright",
                      Path("/usr/share/doc") / pkg.name / "copyright"):  # fmt: skip
        if candidate.is_file():
            dest = out_dir / "licences" / f"{pkg.name}.copyright"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(candidate, dest)
            copyright_file = str(dest.relative_to(out_dir))
            break
    report.notes.setdefault("packages", []).append(
        {
            "package": pkg.name,
            "version": pkg.version,
            "licence": pkg.licence,
            "data": str(data),
            "copyright": copyright_file,
        }
    )


def _write_labels(
    out_dir: Path,
    clips: list[PackClip],
    heard: dict[str, Hypothesis],
    labels: dict[str, Label],
    plan: dict[str, str],
) -> None:
    rows = []
    for c in clips:
        h = heard[c.key]
        rows.append(
            {
                "key": c.key,
                "voice": c.voice,
                "split": plan.get(c.voice),
                "hypothesis": h.text,
                "avg_logprob": round(h.avg_logprob, 3),
                **label_columns(labels.get(c.key)),
            }
        )
    write_atomic(out_dir / "labels.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
