"""`harken prepare queen` and `harken prepare sky`: the acted English of two free games that
Debian main carries, labelled from their scripts or, where no line matches, by a confident
recogniser (`corpus.importers.script_labels`).

The clips are written out in their own format under `OUT/source/`, heard once by Whisper
tiny.en (cached in `OUT/hypotheses.jsonl`), labelled, and then converted to 16 kHz like every
other import. `OUT/labels.jsonl` says for each clip which kind of label it got, so the two
kinds can be compared.

Dev and test hold voices never trained on: they are drawn by character, whole characters at a
time, from the dialogues whose speaker the game's files name, and take script labels only (a
pseudo-label would score the recogniser that made it). Joe, the hero, speaks in every scene
and stays in train; so do clips whose speaker is unknown, except cut-scenes that lead to a
held-out character's dialogue, which are dropped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus.importers import queen, sky
from corpus.importers.candidates import Candidate, PrepareError
from corpus.importers.report import Report
from corpus.importers.script_labels import (
    Hypothesis,
    Label,
    ScriptIndex,
    Transcriber,
    agreement,
    hypotheses,
    label,
    label_columns,
    whisper_transcriber,
    write_atomic,
)

TEST_MINUTES = 35.0
TEST_VOICES = 10
DEV_MINUTES = 15.0
DEV_VOICES = 4
MP3_BYTES_PER_SECOND = 2000  # the clips' 16 kbit/s, for a duration before decoding
GAMES_DIR = Path(__file__).resolve().parents[2] / ".venv" / "games"


@dataclass(frozen=True)
class Clip:
    """One extracted clip, before its label."""

    key: str
    path: Path  # in its own format, under OUT/source
    seconds: float
    voice: str
    held_with: frozenset[str] = frozenset()  # voices whose hold-out drops this clip


def read_queen(
    args: argparse.Namespace, report: Report, transcriber: Transcriber | None = None
) -> list[Candidate]:
    path = args.input or _installed(queen.QUEEN_FILE)
    if not path.is_file():
        raise PrepareError(
            f"{path} is missing: install Debian's flight-of-the-amazon-queen "
            "(make setup-synth unpacks it into .venv/games), or give --input queen.1c"
        )
    archive = queen.read_archive(path)
    src = args.out / "source" / "queen"
    src.mkdir(parents=True, exist_ok=True)
    clips = []
    for name, mp3 in sorted(archive.clips.items()):
        out = src / f"{name[:-3].lower()}.mp3"
        if not out.is_file() or out.stat().st_size != len(mp3):
            _write_bytes(out, mp3)
        cut = queen.cutscene_of(name)
        held = archive.cutscene_characters.get(cut, set()) if cut else set()
        voice = archive.voices[name]
        seconds = len(mp3) / MP3_BYTES_PER_SECOND
        clips.append(
            Clip(name[:-3].lower(), out, seconds, voice, frozenset(f"queen:{c}" for c in held))
        )
    script = ScriptIndex(archive.script)
    report.notes["script_records"] = len(script.records)
    report.notes["licence"] = queen.LICENCE
    splittable = {
        c.voice for c in clips if c.voice not in (queen.JOE, queen.CUTSCENE, queen.UNKNOWN)
    }
    return _candidates(args, report, clips, script, splittable, transcriber)


def read_sky(
    args: argparse.Namespace, report: Report, transcriber: Transcriber | None = None
) -> list[Candidate]:
    data_dir = args.input or _installed(sky.SKY_DIR)
    if not (data_dir / "sky.dnr").is_file():
        raise PrepareError(
            f"{data_dir}/sky.dnr is missing: install Debian's beneath-a-steel-sky "
            "(make setup-synth unpacks it into .venv/games), or give --input DIR"
        )
    extracted = sky.extract_sky(data_dir, args.out, report)
    clips = [Clip(f"sky{c.number}", c.path, c.seconds, "sky:unknown") for c in extracted]
    report.notes["licence"] = sky.LICENCE
    return _candidates(args, report, clips, None, set(), transcriber)


def _candidates(
    args: argparse.Namespace,
    report: Report,
    clips: list[Clip],
    script: ScriptIndex | None,
    splittable: set[str],
    transcriber: Transcriber | None,
) -> list[Candidate]:
    """Hear, label and split the clips; what cannot be labelled is counted in the report."""
    clips = clips[: args.limit] if args.limit else clips
    heard = hypotheses(
        {c.key: str(c.path) for c in clips},
        args.out / "hypotheses.jsonl",
        (lambda: transcriber) if transcriber else whisper_transcriber,
        args.hypotheses,
    )
    labels: dict[str, Label] = {}
    for c in clips:
        got = label(heard[c.key], script)
        if isinstance(got, str):
            report.drop(got, f"{c.key}: {heard[c.key].text!r}")
        else:
            labels[c.key] = got
    seconds: dict[str, float] = defaultdict(float)
    for c in clips:
        if c.voice in splittable and c.key in labels and labels[c.key].kind == "script":
            seconds[c.voice] += c.seconds
    plan = voice_splits(seconds, args.test_minutes, args.test_voices, DEV_MINUTES, DEV_VOICES)
    held = {v for v, s in plan.items() if s != "train"}
    out = []
    for c in clips:
        lab = labels.get(c.key)
        if lab is None:
            continue
        split = plan.get(c.voice, "train")
        if split != "train" and lab.kind != "script":
            report.drop("label:pseudo_in_held_out_voice", f"{c.key}: {lab.text!r}")
            continue
        if split == "train" and c.held_with & held:
            report.drop("voice:held_out_character_in_cutscene", c.key)
            continue
        audio = c.path.resolve()
        out.append(
            Candidate(c.key, lab.text, str(audio), f"audio/{c.key}.wav", c.voice, split=split)
        )
    _write_labels(args.out, clips, heard, labels, plan)
    report.notes["labels"] = dict(Counter(lab.kind for lab in labels.values()))
    # the error a pseudo-label would have carried where a script label was available
    if (checked := agreement(labels.values(), "script")) is not None:
        report.notes["script_vs_hypothesis"] = checked
    report.notes["splits_by_voice"] = {
        s: sorted(v for v in plan if plan[v] == s) for s in ("dev", "test")
    }
    return out


def voice_splits(
    seconds: dict[str, float],
    test_minutes: float,
    test_voices: int,
    dev_minutes: float,
    dev_voices: int,
) -> dict[str, str]:
    """Voice -> split: voices in the order of a SHA-256 of their name fill test until it holds
    both `test_minutes` and `test_voices`, then dev likewise; the rest train. Whole voices
    move, so no voice is in two splits."""
    order = sorted(seconds, key=lambda v: hashlib.sha256(v.encode()).hexdigest())
    plan: dict[str, str] = {}
    filled: dict[str, list[float]] = {"test": [], "dev": []}
    targets = {"test": (test_minutes, test_voices), "dev": (dev_minutes, dev_voices)}
    for voice in order:
        split = "train"
        for name in ("test", "dev"):
            minutes, count = targets[name]
            if sum(filled[name]) / 60 < minutes or len(filled[name]) < count:
                split = name
                filled[name].append(seconds[voice])
                break
        plan[voice] = split
    return plan


def _write_labels(
    out_dir: Path,
    clips: list[Clip],
    heard: dict[str, Hypothesis],
    labels: dict[str, Label],
    plan: dict[str, str],
) -> None:
    lines = []
    for c in clips:
        row = {
            "key": c.key,
            "voice": c.voice,
            "split": plan.get(c.voice, "train"),
            "hypothesis": heard[c.key].text,
            **label_columns(labels.get(c.key)),
        }
        lines.append(json.dumps(row))
    write_atomic(out_dir / "labels.jsonl", "\n".join(lines) + "\n")


def _installed(debian_path: Path) -> Path:
    """A game file where Debian's package installs it, else where `make setup-synth` unpacks
    it (`.venv/games/<package>/...`, without the scummvm the package depends on)."""
    if debian_path.exists():
        return debian_path
    return GAMES_DIR / debian_path.relative_to("/usr/share/scummvm")


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


READERS: dict[str, Callable[[argparse.Namespace, Report], list[Candidate]]] = {
    "queen": read_queen,
    "sky": read_sky,
}
