"""`harken prepare` on tiny corpora written in each real layout, with real (short) audio."""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import harken_cli
from corpus import prepare
from corpus.importers import asterisk
from models.manifest import read_manifest

needs_ffmpeg = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="needs ffmpeg")


def _tone(seconds: float, rate: int, amp: float = 0.5, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    wave = (amp * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    return np.stack([wave] * channels, axis=1) if channels > 1 else wave


def _run(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser()
    prepare.add_arguments(parser)
    return prepare.main(parser.parse_args([str(a) for a in argv]))


def _report(out: Path) -> dict:
    return json.loads((out / "prepare_report.json").read_text())


def _check_wav(path: Path, seconds: float) -> np.ndarray:
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert info.frames / 16000 == pytest.approx(seconds, abs=0.01)
    return sf.read(path, dtype="float32")[0]


def _ffmpeg(*args: str | Path) -> None:
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", *map(str, args)]
    subprocess.run(cmd, check=True)


def test_librispeech(tmp_path: Path) -> None:
    root = tmp_path / "dev-clean"
    chapter = root / "19" / "198"
    chapter.mkdir(parents=True)
    (chapter / "19-198.trans.txt").write_text(
        "19-198-0000 HE PAID FIVE DOLLARS\n"
        "19-198-0001 THE B52 FLEW OVER\n"  # the normaliser refuses digits glued to letters
        "19-198-0002 A BROKEN FILE\n"
        "19-198-0003 A MISSING FILE\n"
    )
    sf.write(chapter / "19-198-0000.flac", _tone(0.3, 22050, channels=2), 22050)
    sf.write(chapter / "19-198-0001.flac", _tone(0.3, 22050), 22050)
    (chapter / "19-198-0002.flac").write_bytes(b"fLaC this is not audio")
    out = tmp_path / "out"

    assert _run("librispeech", "--input", root, "--out", out, "--workers", "2") == 0

    [utt] = read_manifest(out / "dev.jsonl", check_audio=True)  # 'dev-clean' -> dev
    assert (utt.text, utt.voice) == ("he paid five dollars", "librispeech:19")
    assert utt.audio == (out / "audio/19/198/19-198-0000.wav").resolve()
    assert utt.duration == pytest.approx(0.3, abs=0.01)
    _check_wav(utt.audio, 0.3)
    report = _report(out)
    assert report["kept_utterances"] == 1
    assert {k: v["count"] for k, v in report["dropped"].items()} == {
        "text:mixed_alnum": 1,
        "audio:unreadable_audio": 1,
        "audio:missing_audio": 1,
    }
    assert "19-198-0001" in report["dropped"]["text:mixed_alnum"]["examples"][0]


@needs_ffmpeg
def test_commonvoice_mp3(tmp_path: Path) -> None:
    clips = tmp_path / "cv" / "clips"
    clips.mkdir(parents=True)
    sf.write(tmp_path / "a.wav", _tone(0.5, 48000), 48000)
    _ffmpeg("-i", tmp_path / "a.wav", clips / "common_voice_en_1.mp3")
    shutil.copy(clips / "common_voice_en_1.mp3", clips / "common_voice_en_2.mp3")
    tsv = tmp_path / "cv" / "train.tsv"
    tsv.write_text(
        "client_id\tpath\tsentence\tup_votes\n"
        'f00dcafe0123456789\tcommon_voice_en_1.mp3\tMr. Smith paid $5 for "it".\t2\n'
        "0123\tcommon_voice_en_2.mp3\tIt costs 5€.\t2\n"
    )
    out = tmp_path / "out"

    assert _run("commonvoice", "--input", tsv, "--out", out, "--workers", "1") == 0

    [utt] = read_manifest(out / "train.jsonl", check_audio=True)
    assert utt.text == "mister smith paid five dollars for it"
    assert utt.voice == "commonvoice:f00dcafe0123"
    assert utt.audio.parent == (out / "audio").resolve()
    _check_wav(utt.audio, 0.5)  # mp3 padding is trimmed by the decoder
    assert _report(out)["dropped"]["text:unspeakable_char"]["count"] == 1


def test_kaldi_segments_pipe_and_speakers(tmp_path: Path) -> None:
    rate = 44100
    quiet, loud = _tone(1.0, rate, amp=0.2), _tone(1.0, rate, amp=0.8)
    sf.write(tmp_path / "rec1.wav", np.concatenate([quiet, loud]), rate)
    sf.write(tmp_path / "rec2.wav", _tone(0.4, 8000), 8000)
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    (data / "wav.scp").write_text(
        f"rec1 {tmp_path / 'rec1.wav'}\nrec2 cat {tmp_path / 'rec2.wav'} |\nrec3 false |\n"
    )
    (data / "segments").write_text(
        "s1 rec1 0.0 1.0\ns2 rec1 1.0 2.0\ns3 rec1 0.5 1.5\ns4 rec1 5.0 6.0\n"
        "s5 rec2 0.0 -1\ns6 rec3 0 1\ns7 rec1 0 1\n"
    )
    (data / "text").write_text(
        "s1 I.B.M. bought 3 companies\ns2 [noise] the loud part\ns3 half and half\n"
        "s4 past the end\ns5 from a pipe\ns6 a failing pipe\ns7 the <unk> word\n"
    )
    (data / "utt2spk").write_text("s1 alice\ns2 bob\ns3 alice\ns4 bob\ns5 carol\ns6 carol\n")
    out = tmp_path / "out"

    assert _run("kaldi", "--input", data, "--out", out) == 0

    utts = {u.audio.stem: u for u in read_manifest(out / "test.jsonl", check_audio=True)}
    assert sorted(utts) == ["s1", "s2", "s3", "s5"]
    assert utts["s1"].text == "i b m bought three companies"
    assert utts["s2"].text == "the loud part"  # '[noise]' is not a word
    assert (utts["s1"].voice, utts["s2"].voice) == ("kaldi:alice", "kaldi:bob")
    rms = {
        k: float(np.sqrt(np.mean(_check_wav(u.audio, u.duration or 0) ** 2)))
        for k, u in utts.items()
    }
    assert rms["s1"] == pytest.approx(0.2 / np.sqrt(2), rel=0.05)
    assert rms["s2"] == pytest.approx(0.8 / np.sqrt(2), rel=0.05)
    s3 = sf.read(utts["s3"].audio, dtype="float32")[0]  # half quiet, then half loud
    assert np.abs(s3[:7000]).max() == pytest.approx(0.2, abs=0.02)
    assert np.abs(s3[-7000:]).max() == pytest.approx(0.8, abs=0.02)
    assert [utts[k].duration for k in ("s1", "s2", "s3")] == pytest.approx([1.0] * 3, abs=0.01)
    assert utts["s5"].duration == pytest.approx(0.4, abs=0.01)
    dropped = _report(out)["dropped"]
    assert (
        dropped["audio:bad_segment"]["count"] == 1
        and "s4" in dropped["audio:bad_segment"]["examples"][0]
    )
    assert dropped["audio:pipe_failed"]["count"] == 1
    assert dropped["text:markup"]["count"] == 1  # '<unk>': a word the transcript lacks


def test_csv_header_and_rerun(tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    sf.write(tmp_path / "clips" / "a.wav", _tone(0.3, 48000, channels=2), 48000)
    table = tmp_path / "mine.csv"
    table.write_text(
        "speaker,file,transcript\n"
        'ann,clips/a.wav,"It\'s 5:30, Dr. Who!"\n'
        "bob,clips/none.wav,no such file\n"
    )
    out = tmp_path / "out"

    assert _run("csv", "--input", table, "--out", out) == 0
    [utt] = read_manifest(out / "all.jsonl", check_audio=True)
    assert (utt.text, utt.voice) == ("it's five thirty doctor who", "ann")
    assert utt.audio == (out / "audio/clips/a.wav").resolve()
    _check_wav(utt.audio, 0.3)
    assert _report(out)["dropped"]["audio:missing_audio"]["count"] == 1

    written = utt.audio.stat().st_mtime_ns
    assert _run("csv", "--input", table, "--out", out, "--split", "mine") == 0
    assert utt.audio.stat().st_mtime_ns == written  # the finished WAV is reused
    assert read_manifest(out / "mine.jsonl") == read_manifest(out / "all.jsonl")


def test_tsv_without_header(tmp_path: Path) -> None:
    sf.write(tmp_path / "b.flac", _tone(0.3, 16000), 16000)
    (tmp_path / "list.tsv").write_text("b.flac\tSt. Paul's 2nd letter\nb.flac\tagain\n")
    out = tmp_path / "out"
    assert _run("csv", "--input", tmp_path / "list.tsv", "--out", out, "--limit", "1") == 0
    [utt] = read_manifest(out / "all.jsonl", check_audio=True)
    assert utt.text == "saint paul's second letter" and utt.voice is None


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["librispeech", "--input", "{tmp}/nowhere"], "is not a directory"),
        (["librispeech", "--input", "{tmp}"], "no *.trans.txt"),
        (["commonvoice", "--input", "{tmp}/train.tsv"], "no clips/ directory"),
        (["kaldi", "--input", "{tmp}"], "has no wav.scp"),
        (["csv", "--input", "{tmp}/three.csv"], "not two"),
        (["csv"], "--input is required"),
        (["asterisk", "--input", "{tmp}", "--transcripts", "{tmp}/none.txt.gz"], "does not exist"),
    ],
)
def test_errors_exit_2_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    (tmp_path / "train.tsv").write_text("client_id\tpath\tsentence\n")
    (tmp_path / "three.csv").write_text("a.wav,hello,x\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert harken_cli.main(["prepare", *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harken prepare: error: ") and reason in err
    assert "Traceback" not in err


PROMPTS = {
    "hello": "Hello.",
    "goodbye": "Goodbye!",
    "vm-goodbye": "Goodbye",  # same text as 'goodbye': same split
    "letters/a": "a",
    "letters/at": "at [@]",
    "beep": "[this is a simple beep tone]",
    "silence/1": "(1 second of silence)",
    "keys": "press * to cancel",
    "typo": "All of our represenatives are busy.",
    "menu-a": "Press 1 to mute or unmute yourself, or 8 to exit.",
    "menu-b": "Press 1 to mute or unmute yourself, or 8 for more options.",
    "pound": "followed by the pound key",
    "enter-pin": "Please enter your pin followed by the pound key.",
    "no-audio": "This prompt has no recording.",
    **{f"digits/{n}": str(n) for n in range(3)},
    **{
        f"say-{i}": f"Please say the {w} word now."
        for i, w in enumerate(["red", "green", "blue", "cyan"])
    },
}


@needs_ffmpeg
def test_asterisk_fixture(tmp_path: Path) -> None:
    sounds = tmp_path / "sounds"
    (sounds / "digits").mkdir(parents=True)
    (sounds / "letters").mkdir()
    (sounds / "silence").mkdir()
    sf.write(tmp_path / "p.wav", _tone(0.5, 16000), 16000)
    _ffmpeg("-i", tmp_path / "p.wav", "-acodec", "g722", "-f", "g722", tmp_path / "p.g722")
    for name in [*PROMPTS, "extra"]:
        if name != "no-audio":
            shutil.copy(tmp_path / "p.g722", sounds / f"{name}.g722")
    lines = "; Core Asterisk Sounds in English\n\n" + "".join(
        f"{k}: {v}\n" for k, v in PROMPTS.items()
    )
    transcripts = tmp_path / "core-sounds-en.txt.gz"
    transcripts.write_bytes(gzip.compress(lines.encode()))
    out = tmp_path / "out"
    argv: list[str | Path] = ["asterisk", "--input", sounds, "--transcripts", transcripts]
    argv += ["--out", out]

    assert _run(*argv, "--test-prompts", "3", "--dev-prompts", "2") == 0

    splits = {
        s: read_manifest(out / f"{s}.jsonl", check_audio=True) for s in ("train", "dev", "test")
    }
    where = {
        u.audio.relative_to((out / "audio").resolve()).with_suffix("").as_posix(): s
        for s, us in splits.items()
        for u in us
    }
    texts = {s: {u.text for u in us} for s, us in splits.items()}
    assert not (
        texts["train"] & texts["test"]
        or texts["train"] & texts["dev"]
        or texts["dev"] & texts["test"]
    )
    assert where["goodbye"] == where["vm-goodbye"] == "train"  # one word: train only
    assert where["letters/a"] == where["digits/0"] == "train"
    assert where["menu-a"] == where["menu-b"]  # six shared words: one group
    assert where["pound"] == where["enter-pin"]  # said whole inside another prompt
    assert len(splits["test"]) >= 3 and len(splits["dev"]) >= 2
    all_utts = [u for us in splits.values() for u in us]
    assert {u.voice for u in all_utts} == {"asterisk:allison"}
    by_name = {u.audio.stem: u for u in all_utts}
    assert by_name["at"].text == "at"  # '[@]' is a note, not speech
    assert by_name["typo"].text == "all of our representatives are busy"
    _check_wav(by_name["hello"].audio, 0.5)
    report = _report(out)
    assert {k: v["count"] for k, v in report["dropped"].items()} == {
        "text:non_speech": 2,
        "text:key_symbol": 1,
        "audio:missing_audio": 1,
    }
    assert report["audio_without_transcript"] == ["extra"]
    readme = (out / "README.md").read_text()
    assert "CC-BY-SA-3.0" in readme and "One speaker" in readme

    first = {s: (out / f"{s}.jsonl").read_text() for s in splits}
    shutil.rmtree(out)
    assert _run(*argv, "--test-prompts", "3", "--dev-prompts", "2", "--workers", "1") == 0
    assert {s: (out / f"{s}.jsonl").read_text() for s in splits} == first  # deterministic


def test_split_prompts_properties() -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    words += ["golf", "hotel", "india", "juliet", "kilo", "lima"]
    texts = {
        f"p{i:03d}": f"please say {words[i % 12]} and {words[(i * 5) % 12]} number {i}"
        for i in range(300)
    }
    texts |= {"dup-a": "thank you for calling", "dup-b": "thank you for calling"}
    texts |= {
        "inner": "to mute or unmute yourself",
        "outer": "press one to mute or unmute yourself now",
    }
    texts |= {f"w{i}": words[i] for i in range(12)}
    plan = asterisk.split_prompts(texts, test=150, dev=100)
    reversed_plan = asterisk.split_prompts(dict(reversed(texts.items())), test=150, dev=100)
    assert plan == reversed_plan  # independent of input order
    counts = {s: sum(v == s for v in plan.values()) for s in ("train", "dev", "test")}
    assert counts["test"] >= 150 and counts["dev"] >= 100 and sum(counts.values()) == len(texts)
    assert plan["dup-a"] == plan["dup-b"] and plan["inner"] == plan["outer"]
    assert all(plan[f"w{i}"] == "train" for i in range(12))
    by_text: dict[str, set[str]] = {}
    for name, split in plan.items():
        by_text.setdefault(texts[name], set()).add(split)
    assert all(len(s) == 1 for s in by_text.values())
