"""`harken prepare packs` on tiny packages laid out as Debian's are (Ogg, WAV, codec2's raw
PCM), heard by a fake recogniser: labels from file names and from confident hypotheses only,
drops counted by reason, whole voices per split, and 16 kHz output."""

from __future__ import annotations

import argparse
import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus import prepare
from corpus.importers import codec2, megaglest, packs
from corpus.importers.candidates import PrepareError
from corpus.importers.pack_clips import PackClip
from corpus.importers.report import Report
from corpus.importers.script_labels import Hypothesis
from models.manifest import read_manifest

UNSURE = {("Pirate", "Missed"), ("Default", "Missed")}  # heard, but not confidently
SILENT = {"archer_ack1"}  # the recogniser hears no speech


def _tone(seconds: float, rate: int, channels: int = 1, hz: float = 220) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * hz * t) * (1 + 0.2 * np.sin(2 * np.pi * 3 * t))
    return np.repeat(x[:, None], channels, axis=1) if channels > 1 else x


def _ogg(path: Path, seconds: float = 0.6, rate: int = 44100, channels: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, _tone(seconds, rate, channels), rate, format="OGG", subtype="VORBIS")


def _wav(path: Path, seconds: float = 0.8, rate: int = 48000) -> None:
    """A tone with noise seeded by the file's name, so no two files are copies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    noise = np.random.default_rng(zlib.crc32(path.name.encode())).normal(
        0, 0.01, int(seconds * rate)
    )
    sf.write(path, _tone(seconds, rate) + noise, rate, subtype="PCM_16")


def _bursts(seconds: list[float], rate: int = codec2.RATE, gap: float = 0.5) -> np.ndarray:
    """Tones `seconds` long with `gap` s of near-silence between them."""
    parts = []
    for s in seconds:
        parts += [_tone(s, rate), 1e-4 * np.ones(int(gap * rate))]
    return np.concatenate(parts)


def _raw(path: Path, audio: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.round(audio * 32767).astype("<i2").tobytes())


def _unit(techs: Path, faction: str, unit: str, selection: list[str], command: list[str]) -> Path:
    d = techs / "megapack" / "factions" / faction / "units" / unit
    d.mkdir(parents=True, exist_ok=True)
    sel = "".join(f'<sound path="{p}"/>' for p in selection)
    cmd = "".join(f'<sound path="{p}"/>' for p in command)
    (d / f"{unit}.xml").write_text(
        f'<unit><parameters><selection-sounds enabled="true">{sel}</selection-sounds>'
        f'<command-sounds enabled="true">{cmd}</command-sounds></parameters>'
        '<skills><skill><sound enabled="true"><sound-file path="sounds/guard_attack1.wav"/>'
        "</sound></skill></skills></unit>"
    )
    return d


def _packages(root: Path) -> Path:
    """The five packages' data as setup.sh unpacks them, a few clips each."""
    hw = root / "hedgewars-data"
    for pack in ("Pirate", "Default", "British", "Surfer"):
        for cue in ("Hello", "Missed", "Ooff1"):
            _ogg(hw / pack / f"{cue}.ogg")
    _ogg(hw / "Default_de" / "Hello.ogg")  # a translation: left out
    (root / "hedgewars-data.copyright").write_text("Files: share/hedgewars/Data/Sounds/*\n")

    techs = root / "megaglest-data"
    common = techs / "megapack" / "commondata" / "sounds"
    for name in ("guard_select1", "guard_ack1", "archer_ack1", "archer_select1", "cow_select1"):
        _wav(common / f"{name}.wav")
    _wav(common / "guard_attack1.wav")  # an effect: no unit lists it as its voice
    tech_dir = _unit(techs, "tech", "technician", [], ["sounds/technician_ack1.wav"])
    _wav(tech_dir / "sounds" / "technician_ack1.wav", rate=22050)
    _unit(techs, "romans", "guard", ["$COMMONDATAPATH/sounds/guard_select1.wav"],
          ["$COMMONDATAPATH/sounds/guard_ack1.wav"])  # fmt: skip
    archer = _unit(techs, "tech", "archer", ["$COMMONDATAPATH/sounds/archer_select1.wav"],
                   ["$COMMONDATAPATH/sounds/archer_ack1.wav", "sounds/guard_ack9.wav"])  # fmt: skip
    (archer / "sounds").mkdir()
    (archer / "sounds" / "guard_ack9.wav").write_bytes((common / "guard_ack1.wav").read_bytes())
    _unit(techs, "tech", "cow", ["$COMMONDATAPATH/sounds/cow_select1.wav"], [])

    kl = root / "klettres-data"
    _ogg(kl / "en" / "alpha" / "A.ogg", channels=1)
    _ogg(kl / "en" / "syllab" / "dog.ogg")
    _ogg(kl / "en" / "syllab" / "th.ogg")  # a sound, not a word
    _ogg(kl / "en_GB" / "alpha" / "b.ogg")
    _ogg(kl / "fr" / "alpha" / "A.ogg")  # not English: never read

    kt = root / "ktuberling-data"
    for word in ("ball", "egypt_palmtree", "moon_ufo"):
        _ogg(kt / "en" / f"{word}.ogg")
    _ogg(kt / "de" / "ball.ogg")

    c2 = root / "codec2-examples"
    _raw(c2 / "hts.raw", _bursts([2.0, 3.0, 2.5, 3.0, 2.0]))  # 15 s: cut in its pauses
    for voice in ("big_dog", "g3plx", "vk5qi"):
        _raw(c2 / f"{voice}.raw", _tone(1.5, codec2.RATE))
    _raw(c2 / "sine1k_2Hz_spread.raw", _tone(1.0, codec2.RATE))  # not speech
    (c2 / "broken.raw").write_bytes(b"\x01\x02\x03")  # not whole 16-bit samples
    return root


def _fake(path: str) -> Hypothesis:
    """The fake recogniser: confident unless the clip is listed as unsure or silent."""
    stem = Path(path).stem
    if stem in SILENT:
        return Hypothesis("", "uh", -0.3, 0.9, 1.0)
    if (Path(path).parent.name, stem) in UNSURE:
        return Hypothesis("", "you missed", -0.9, 0.1, 1.1)
    if stem == "dog":
        return Hypothesis("", "dog", -0.3, 0.05, 1.0)
    return Hypothesis("", "yes my lord", -0.2, 0.05, 1.1)


def _args(root: Path, out: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    prepare.add_arguments(parser)
    return parser.parse_args(["packs", "--input", str(root), "--out", str(out), "--workers", "1",
                              *extra])  # fmt: skip


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("packs")
    root = _packages(tmp / "packs")
    out = tmp / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packs, "whisper_transcriber", lambda threads=0: _fake)
        assert prepare.main(_args(root, out)) == 0
    return out


def test_manifests_hold_whole_voices_at_16_khz(prepared: Path) -> None:
    rows = {s: read_manifest(prepared / f"{s}.jsonl", check_audio=True) for s in packs.SPLITS}
    voices = {s: {u.voice for u in rows[s]} for s in packs.SPLITS}
    assert not voices["train"] & voices["dev"]
    assert not voices["train"] & voices["test"]
    assert not voices["dev"] & voices["test"]
    for source in ("hedgewars", "megaglest", "codec2"):  # 3+ voices: one each to dev and test
        for split in ("dev", "test"):
            assert len([v for v in voices[split] if v.startswith(f"{source}:")]) == 1, split
    for voice in ("klettres:en", "klettres:en_GB", "ktuberling:en"):  # too few voices to hold out
        assert voice in voices["train"]
    for u in (u for split in rows.values() for u in split):
        info = sf.info(str(u.audio))
        assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
        assert u.duration == pytest.approx(info.duration, abs=1e-3)
    hts = [u for split in rows.values() for u in split if u.voice == "codec2:hts"]
    assert len(hts) > 1 and all(u.duration and u.duration <= codec2.MAX_SECONDS for u in hts)
    assert sum(u.duration or 0 for u in hts) == pytest.approx(15.0, abs=0.05)


def test_labels_from_names_and_confident_hypotheses(prepared: Path) -> None:
    rows = [u for s in packs.SPLITS for u in read_manifest(prepared / f"{s}.jsonl")]
    by_voice: dict[str, set[str]] = {}
    for u in rows:
        by_voice.setdefault(u.voice or "", set()).add(u.text)
    assert by_voice["klettres:en"] == {"a", "dog"}  # the letter as the normaliser spells it
    assert by_voice["klettres:en_GB"] == {"b"}
    assert by_voice["ktuberling:en"] == {"ball", "palm tree"}  # ufo: its reading is unsure
    assert by_voice["hedgewars:Pirate"] == {"yes my lord"}  # 'Missed' was unsure
    assert by_voice["hedgewars:British"] == {"yes my lord"}  # its 'Missed' was confident
    assert len([u for u in rows if u.voice == "hedgewars:British"]) == 2
    assert not any(u.voice == "hedgewars:Default_de" for u in rows)
    labels = [json.loads(line) for line in (prepared / "labels.jsonl").read_text().splitlines()]
    kinds = {r["key"]: r["kind"] for r in labels}
    assert kinds["klettres-en-letter-a"] == "name"
    assert kinds["hedgewars-Pirate-Hello"] == "pseudo"
    assert kinds["hedgewars-Pirate-Missed"] is None


def test_report_counts_every_drop_and_names_the_packages(prepared: Path) -> None:
    report = json.loads((prepared / "prepare_report.json").read_text())
    dropped = {reason: v["count"] for reason, v in report["dropped"].items()}
    assert dropped == {
        "cue:non_verbal": 4,  # Ooff1 in each English pack
        "label:unsure": 2,
        "label:no_speech": 1,  # archer_ack1
        "voice:not_speech": 1,  # the cow
        "text:not_a_word": 1,  # th
        "text:unsure_reading": 1,  # ufo
        "file:not_speech": 1,  # the sine
        "audio:unreadable_audio": 1,  # broken.raw
    }
    assert report["megaglest_copies"] == 1  # archer's guard_ack9.wav is guard_ack1.wav's bytes
    assert report["name_vs_hypothesis"]["identical"] == 1  # only 'dog' was heard as named
    packages = {p["package"]: p for p in report["packages"]}
    assert set(packages) == {p.name for p in packs.PACKAGES}
    assert packages["hedgewars-data"]["version"] == "1.0.2-6"
    assert packages["hedgewars-data"]["copyright"] == "licences/hedgewars-data.copyright"
    assert (prepared / "licences" / "hedgewars-data.copyright").is_file()
    hw = report["by_source"]["hedgewars"]
    assert hw["dropped"] == {"cue:non_verbal": 4, "label:unsure": 2}
    assert sum(s["utterances"] for s in hw["splits"].values()) == hw["labelled"] == 6
    assert hw["lost_after_labelling"] == 0
    assert report["hedgewars_packs"]["translations_left_out"] == ["Default_de"]


def test_missing_or_empty_package_is_a_clear_error(tmp_path: Path) -> None:
    root = _packages(tmp_path / "packs")
    out = tmp_path / "out"
    for d in (root / "hedgewars-data").iterdir():
        if d.is_dir() and d.name != "Default_de":
            for f in d.iterdir():
                f.unlink()
    with pytest.raises(PrepareError, match="no English voice clips"):
        packs.read_packs(_args(root, out), Report(), _fake)
    whole = _packages(tmp_path / "whole")
    (whole / "megaglest-data").rename(whole / "moved")
    with pytest.raises(PrepareError, match=r"megaglest-data is missing: .*make setup-synth"):
        packs.read_packs(_args(whole, out), Report(), _fake)
    assert prepare.main(_args(tmp_path / "nowhere", out)) == 2


def _rows(out: Path) -> dict[str, tuple[str, str | None, str]]:
    """Clip -> (text, voice, split), for comparing two runs whose audio lies in other dirs."""
    return {
        u.audio.stem: (u.text, u.voice, split)
        for split in packs.SPLITS
        for u in read_manifest(out / f"{split}.jsonl")
    }


def _never_built(threads: int = 0) -> None:
    raise AssertionError("a complete seed must not build the recogniser")


def test_a_seed_labels_every_clip_without_the_recogniser(prepared: Path, tmp_path: Path) -> None:
    seed = tmp_path / "packs_hypotheses.jsonl.gz"
    seed.write_bytes(gzip.compress((prepared / "hypotheses.jsonl").read_bytes()))
    root = _packages(tmp_path / "packs")
    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packs, "whisper_transcriber", _never_built)
        assert prepare.main(_args(root, out, "--hypotheses", str(seed))) == 0
    assert _rows(out) == _rows(prepared)  # the same labels and the same splits
    assert (out / "hypotheses.jsonl").read_text() == (prepared / "hypotheses.jsonl").read_text()


def test_a_partial_seed_hears_only_the_rest(prepared: Path, tmp_path: Path) -> None:
    lines = (prepared / "hypotheses.jsonl").read_text().splitlines()
    seed = tmp_path / "half.jsonl"
    seed.write_text("\n".join(lines[::2]) + "\n")
    heard: list[str] = []

    def counting(path: str) -> Hypothesis:
        heard.append(path)
        return _fake(path)

    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packs, "whisper_transcriber", lambda threads=0: counting)
        args = _args(_packages(tmp_path / "packs"), out, "--hypotheses", str(seed))
        assert prepare.main(args) == 0
    assert len(heard) == len(lines) - len(lines[::2])
    assert _rows(out) == _rows(prepared)


def test_a_bad_seed_is_a_clear_error(
    prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _packages(tmp_path / "packs")
    other = tmp_path / "queen.jsonl"
    other.write_text(json.dumps({"key": "020001p1", "text": "hello", "avg_logprob": -0.1,
                                 "no_speech_prob": 0.0, "compression_ratio": 1.0}) + "\n")  # fmt: skip
    broken = tmp_path / "broken.jsonl"
    broken.write_text((prepared / "hypotheses.jsonl").read_text().splitlines()[0] + "\n{oops\n")
    notgz = tmp_path / "plain.jsonl.gz"
    notgz.write_text("not gzip")
    cases = {
        other: "none of its 1 clips is among this source's",
        broken: "line 2: not a hypothesis",
        notgz: "cannot read it",
        tmp_path / "absent.jsonl": "is not a file",
    }
    for seed, reason in cases.items():
        assert prepare.main(_args(root, tmp_path / "out", "--hypotheses", str(seed))) == 2
        assert reason in capsys.readouterr().err
    asterisk_args = _args(root, tmp_path / "out", "--hypotheses", str(other))
    asterisk_args.source = "asterisk"
    assert prepare.main(asterisk_args) == 2
    assert "--hypotheses is for queen, sky and packs" in capsys.readouterr().err


def test_pause_spans_cut_in_the_middle_of_pauses() -> None:
    rate = codec2.RATE
    audio = _bursts([4.0, 4.0, 4.0, 4.0], gap=0.4).astype(np.float32)
    spans = codec2.pause_spans(audio, rate, max_seconds=10.0)
    assert spans[0][0] == 0 and spans[-1][1] == audio.size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(end - start <= 10 * rate for start, end in spans)
    for _, cut in spans[:-1]:
        assert np.abs(audio[cut - 400 : cut + 400]).max() < 1e-3  # inside a gap, not a word
    short = audio[: 5 * rate]
    assert codec2.pause_spans(short, rate) == [(0, short.size)]
    tone = _tone(12.0, rate).astype(np.float32)
    assert codec2.pause_spans(tone, rate) == [(0, tone.size)]  # no pause: kept whole


def test_megaglest_voices_by_role(tmp_path: Path) -> None:
    techs = _packages(tmp_path) / "megaglest-data"
    refs = megaglest.voice_refs(techs)
    assert {(r.unit, r.path.name) for r in refs} == {
        ("technician", "technician_ack1.wav"),
        ("guard", "guard_select1.wav"),
        ("guard", "guard_ack1.wav"),
        ("archer", "archer_select1.wav"),
        ("archer", "archer_ack1.wav"),
        ("archer", "guard_ack9.wav"),
        ("cow", "cow_select1.wav"),
    }
    assert megaglest.role_of("swordman_ack3", "spearman") == "swordman"
    assert megaglest.role_of("ack1", "magician") == "magician"
    assert megaglest.role_of("carpet_sel2", "flying_carpet") == "carpet"
    assert megaglest.role_of("sheep4", "sheep") == "sheep"
    copied = tmp_path / "copy"
    assert megaglest.copy_voices(techs, copied) == 11  # 4 XMLs and 7 recordings
    assert not (copied / "megapack" / "commondata" / "sounds" / "guard_attack1.wav").exists()
    assert {(r.unit, r.path.relative_to(copied)) for r in megaglest.voice_refs(copied)} == {
        (r.unit, r.path.relative_to(techs)) for r in refs
    }


def test_split_voices_per_package() -> None:
    clips = [
        PackClip(f"{src}-{v}-{i}", Path("x"), 1.0, f"{src}:{v}")
        for src, n in (("hedgewars", 12), ("klettres", 2))
        for v in range(n)
        for i in range(3)
    ]
    plan = packs.split_voices(clips)
    hw = [s for v, s in plan.items() if v.startswith("hedgewars:")]
    assert (hw.count("test"), hw.count("dev"), hw.count("train")) == (1, 1, 10)
    assert {s for v, s in plan.items() if v.startswith("klettres:")} == {"train"}
    assert plan == packs.split_voices(list(reversed(clips)))  # order-free
    assert [packs.held_voices(n) for n in (1, 2, 3, 10, 27, 40)] == [0, 0, 1, 1, 3, 4]
