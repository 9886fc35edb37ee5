"""Readers for the common corpus layouts: LibriSpeech, Common Voice, a Kaldi data directory
and a plain CSV/TSV. Each checks that its input has the layout it expects (a wrong one is a
`PrepareError`, not a run of empty manifests) and returns candidates in source order; lines it
cannot use are counted in the report. The manifest name comes from `--split`, else from the
input's name ('dev-clean' -> dev), else 'all'."""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
from pathlib import Path

from corpus.importers.candidates import Candidate, PrepareError, need_dir, need_file
from corpus.importers.report import Report

_PATH_COLUMNS = ("path", "audio", "file", "filename", "wav")
_TEXT_COLUMNS = ("text", "transcript", "sentence", "transcription")
_VOICE_COLUMNS = ("voice", "speaker", "speaker_id", "client_id")


def read_librispeech(args: argparse.Namespace, report: Report) -> list[Candidate]:
    """`<root>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt` lines `ID TEXT`, `ID.flac`."""
    root: Path = need_dir(args.input, "LibriSpeech root")
    transcripts = sorted(root.rglob("*.trans.txt"))
    if not transcripts:
        raise PrepareError(
            f"no *.trans.txt under {root}: not a LibriSpeech directory "
            "(<root>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt)"
        )
    split = args.split or _split_name(root.name)
    out = []
    for trans in transcripts:
        for number, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), 1):
            utt, _, text = line.strip().partition(" ")
            if not utt:
                continue
            if not text.strip():
                report.drop("text:empty", f"{trans.name}:{number}: {utt}")
                continue
            flac = trans.parent / f"{utt}.flac"
            rel = flac.relative_to(root).with_suffix(".wav")
            voice = f"librispeech:{utt.split('-')[0]}"
            out.append(Candidate(utt, text, str(flac), f"audio/{rel}", voice, split=split))
    return out


def read_commonvoice(args: argparse.Namespace, report: Report) -> list[Candidate]:
    """A Common Voice TSV (client_id, path, sentence) with its mp3s in `clips/` beside it."""
    tsv: Path = need_file(args.input, "Common Voice TSV")
    clips = tsv.parent / "clips"
    if not clips.is_dir():
        raise PrepareError(f"no clips/ directory beside {tsv} (Common Voice keeps its mp3s there)")
    split = args.split or _split_name(tsv.stem)
    out = []
    with tsv.open(newline="", encoding="utf-8") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = {"client_id", "path", "sentence"} - set(rows.fieldnames or [])
        if missing:
            raise PrepareError(
                f"{tsv} has no column {', '.join(sorted(missing))}: not Common Voice"
            )
        for number, row in enumerate(rows, 2):
            name, text, client = row.get("path"), row.get("sentence"), row.get("client_id")
            if not name or text is None or client is None:
                report.drop("malformed_line", f"{tsv.name}:{number}")
                continue
            clip = clips / name if Path(name).suffix else clips / f"{name}.mp3"
            out_rel = f"audio/{Path(name).stem}.wav"
            voice = f"commonvoice:{client[:12]}"
            out.append(Candidate(Path(name).stem, text, str(clip), out_rel, voice, split=split))
    return out


def read_kaldi(args: argparse.Namespace, report: Report) -> list[Candidate]:
    """A Kaldi data dir: `wav.scp`, `text`, optional `segments` and `utt2spk`.

    wav.scp entries are paths (relative ones to the current directory, as in a Kaldi recipe,
    else to the data dir) or commands ending in `|`, run with bash and decoded by ffmpeg."""
    data: Path = need_dir(args.input, "Kaldi data directory")
    for name in ("wav.scp", "text"):
        if not (data / name).is_file():
            raise PrepareError(f"{data} has no {name}: not a Kaldi data directory")
    wavs = {k: _kaldi_audio(v, data) for k, v in _table(data / "wav.scp").items()}
    texts = _table(data / "text")
    speakers = _table(data / "utt2spk") if (data / "utt2spk").is_file() else {}
    spans = _segments(data / "segments") if (data / "segments").is_file() else None
    split = args.split or _split_name(data.name)
    out = []
    for utt, text in texts.items():
        if spans is not None and utt not in spans:
            report.drop("no_segment", f"{utt} is in text but not in segments")
            continue
        recording, start, end = spans[utt] if spans is not None else (utt, 0.0, None)
        if recording not in wavs:
            report.drop("no_recording", f"{utt}: recording {recording} is not in wav.scp")
            continue
        voice = f"kaldi:{speakers[utt]}" if utt in speakers else None
        out_rel = f"audio/{_safe_name(utt)}.wav"
        out.append(Candidate(utt, text, wavs[recording], out_rel, voice, start, end, split=split))
    return out


def read_csv(args: argparse.Namespace, report: Report) -> list[Candidate]:
    """A CSV/TSV of audio path and transcript; a header names them, or two columns without."""
    table: Path = need_file(args.input, "CSV file")
    with table.open(newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f, delimiter=_delimiter(table)) if any(c.strip() for c in r)]
    if not rows:
        raise PrepareError(f"{table} is empty")
    path_col, text_col, voice_col, has_header = _columns(table, rows[0])
    split = args.split or _split_name(table.stem)
    out = []
    for number, row in enumerate(rows[1:] if has_header else rows, 2 if has_header else 1):
        if len(row) <= max(path_col, text_col) or not row[path_col].strip():
            report.drop("malformed_line", f"{table.name}:{number}: {row!r}")
            continue
        rel = row[path_col].strip()
        audio = table.parent / rel
        voice = None
        if voice_col is not None and voice_col < len(row):
            voice = row[voice_col].strip() or None
        key = f"{table.name}:{number}"
        out.append(Candidate(key, row[text_col], str(audio), _csv_out(rel), voice, split=split))
    return out


def _split_name(name: str) -> str:
    """'dev-clean' -> 'dev', 'train.tsv' stem 'train' -> 'train'; anything else -> 'all'."""
    m = re.match(r"(train|dev|test)(?![a-z])", name.lower())
    return m.group(1) if m else "all"


def _safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key).lstrip(".") or "_"


def _table(path: Path) -> dict[str, str]:
    """A Kaldi table: first field the key, the rest of the line its value."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split(maxsplit=1)
        if fields:
            out[fields[0]] = fields[1].strip() if len(fields) > 1 else ""
    return out


def _segments(path: Path) -> dict[str, tuple[str, float, float | None]]:
    out: dict[str, tuple[str, float, float | None]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            seg, recording, start, end = fields[0], fields[1], float(fields[2]), float(fields[3])
        except (IndexError, ValueError):
            raise PrepareError(f"{path}:{number}: expected 'segment recording start end'") from None
        if end != -1 and end <= start:  # Kaldi: end -1 means to the end of the recording
            raise PrepareError(f"{path}:{number}: segment ends ({end}) before it starts ({start})")
        out[seg] = (recording, start, None if end == -1 else end)
    return out


def _kaldi_audio(value: str, data: Path) -> str:
    if value.endswith("|"):
        return value
    path = Path(value)
    if path.is_absolute() or path.exists() or not (data / path).exists():
        return str(path.absolute())
    return str(data / path)


def _delimiter(path: Path) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    sample = path.read_text(encoding="utf-8-sig")[:8192]
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        return ","


def _columns(table: Path, first: list[str]) -> tuple[int, int, int | None, bool]:
    """(path column, text column, voice column or None, has a header)."""
    names = [c.strip().lower() for c in first]
    path_col = next((names.index(n) for n in _PATH_COLUMNS if n in names), None)
    text_col = next((names.index(n) for n in _TEXT_COLUMNS if n in names), None)
    if path_col is not None and text_col is not None:
        voice_col = next((names.index(n) for n in _VOICE_COLUMNS if n in names), None)
        return path_col, text_col, voice_col, True
    if len(first) == 2:
        return 0, 1, None, False
    raise PrepareError(
        f"{table}: the header names no path column ({'/'.join(_PATH_COLUMNS)}) and text column "
        f"({'/'.join(_TEXT_COLUMNS)}), and there are {len(first)} columns, not two"
    )


def _csv_out(rel: str) -> str:
    """Output path mirroring the audio's path under the CSV's directory, or hashed outside it."""
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm.startswith(".."):
        digest = hashlib.sha1(norm.encode()).hexdigest()[:12]
        return f"audio/outside/{digest}-{_safe_name(Path(norm).stem)}.wav"
    return f"audio/{Path(norm).with_suffix('.wav').as_posix()}"
