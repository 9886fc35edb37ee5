"""A tiny real corpus build with espeak-ng and flite: valid WAVs, manifests, LM text, resume."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus import synth
from corpus.text import normalise
from corpus.voices import DEFAULT_ENGINES, HELD_OUT, Prosody, Voice, render, render_rhvoice
from decoder.metrics import wer
from evaluation.peers import WhisperTinyEn
from models.manifest import read_manifest

pytestmark = pytest.mark.skipif(
    not (shutil.which("espeak-ng") and shutil.which("flite")),
    reason="needs espeak-ng and flite (scripts/setup.sh installs them)",
)

FORTUNES = """In 1984, Mr. Smith paid $5 for the 3rd book.
\t\t-- Anon
%
The quick brown fox jumps over the lazy dog.
%
A penny saved is a penny earned, they say.
%
"""


def _args(tmp_path: Path) -> argparse.Namespace:
    (tmp_path / "fortunes").mkdir(exist_ok=True)
    (tmp_path / "fortunes" / "tiny").write_text(FORTUNES)
    parser = argparse.ArgumentParser()
    synth.add_arguments(parser)
    return parser.parse_args(
        [
            *("--out", str(tmp_path / "corpus"), "--fortunes", str(tmp_path / "fortunes")),
            *("--engines", "espeak-ng,flite", "--train-hours", "0.01", "--renders", "2"),
            *("--dev-minutes", "0.01", "--test-minutes", "0.01", "--workers", "2"),
        ]
    )


def test_tiny_build_writes_wavs_manifests_and_lm_text(tmp_path: Path) -> None:
    args = _args(tmp_path)
    assert synth.main(args) == 0
    out = args.out
    train, dev, test = (read_manifest(out / f"{s}.jsonl", check_audio=True) for s in synth.SPLITS)
    assert len(dev) == len(test) == 1 and len(train) >= 1
    held_labels = {v.label for v in HELD_OUT}
    assert {u.voice for u in dev + test} <= held_labels
    assert not {u.voice for u in train} & held_labels
    assert not {u.text for u in train} & {u.text for u in dev + test}
    for utt in train + dev + test:
        info = sf.info(str(utt.audio))
        assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
        assert utt.duration == pytest.approx(info.duration, abs=1e-3) and utt.duration > 0.5
    lm = (out / "lm_text.txt").read_text().splitlines()
    assert lm == [u.text for u in train[:1]]  # every sentence except dev and test
    assert normalise("In 1984, Mr. Smith paid $5 for the 3rd book.").text in {
        u.text for u in train + dev + test
    }
    stats = json.loads((out / "stats.json").read_text())
    assert stats["text"]["kept"] == 3 and stats["render_failed"] == 0


def test_build_resumes_without_rerendering(tmp_path: Path) -> None:
    args = _args(tmp_path)
    synth.main(args)
    wavs = sorted(args.out.rglob("*.wav"))
    stamps = [w.stat().st_mtime_ns for w in wavs]
    wavs[0].unlink()
    synth.main(args)
    again = sorted(args.out.rglob("*.wav"))
    assert again == wavs
    assert [w.stat().st_mtime_ns for w in again[1:]] == stamps[1:]


def _median_f0(path: Path) -> float:
    """Median autocorrelation pitch of the voiced-looking 40 ms frames, in Hz."""
    audio, rate = sf.read(str(path))
    frame = int(0.04 * rate)
    lo, hi = rate // 400, rate // 60
    f0s = []
    for start in range(0, len(audio) - frame, frame // 2):
        x = audio[start : start + frame] - audio[start : start + frame].mean()
        if np.sqrt(np.mean(x**2)) < 0.02:
            continue
        ac = np.correlate(x, x, "full")[frame - 1 :]
        f0s.append(rate / (lo + int(np.argmax(ac[lo:hi]))))
    return float(np.median(f0s))


@pytest.mark.skipif(not shutil.which("festival"), reason="needs festival")
@pytest.mark.parametrize(
    "voice",
    [
        Voice("festival", "kal_diphone"),
        Voice("flite", "kal16"),
        Voice("festival-rab", "rab_diphone"),
    ],
)
def test_pitch_reaches_the_female_range(tmp_path: Path, voice: Voice) -> None:
    """The natural-sounding training voices are male; a raised pitch must really sound."""
    spoken = "how are you doing today my friend"
    render(voice, spoken, Prosody(), tmp_path / "own.wav")
    render(voice, spoken, Prosody(pitch=1.9), tmp_path / "high.wav")
    own, high = _median_f0(tmp_path / "own.wav"), _median_f0(tmp_path / "high.wav")
    assert own < 150 and high > 1.5 * own, (own, high)


def test_rab_says_the_words_it_is_given_through_cmudict(tmp_path: Path) -> None:
    """Roger's diphones are read through CMUdict mapped onto their own phone set (OALD, which
    Debian's voice wants, is non-commercial): a listener must hear the sentence, not the
    fallback diphone. Whisper tiny.en is the listener (the peers extra)."""
    spoken = "please call stella and ask her to bring these things with her from the store"
    render(Voice("festival-rab", "rab_diphone"), spoken, Prosody(), tmp_path / "rab.wav")
    audio, rate = sf.read(str(tmp_path / "rab.wav"), dtype="float32")
    assert rate == 16000 and 2.5 < len(audio) / rate < 8
    heard = WhisperTinyEn(threads=1).transcribe(audio * (0.9 / np.abs(audio).max()))
    assert wer([(spoken, heard)]).rate <= 0.2, heard


def test_rab_is_trained_on_only_when_asked_for(tmp_path: Path) -> None:
    """festival-rab is not a default engine (earlier corpora keep their plans); asked for, it
    speaks training utterances and never dev or test."""
    assert "festival-rab" not in DEFAULT_ENGINES
    args = _args(tmp_path)
    args.engines, args.renders = "festival-rab,flite", 4
    assert synth.main(args) == 0
    train = read_manifest(args.out / "train.jsonl", check_audio=True)
    dev_test = [u for s in ("dev", "test") for u in read_manifest(args.out / f"{s}.jsonl")]
    assert "festival-rab:rab_diphone" in {u.voice for u in train}
    assert {u.voice for u in dev_test} <= {v.label for v in HELD_OUT}


@pytest.mark.parametrize("name", ["en-US", "en-GB"])
def test_pico_women_speak_in_the_female_range_and_follow_pitch(tmp_path: Path, name: str) -> None:
    """Pico's voices are the only natural female training voices: they must sound female by
    default and take a lower pitch and a faster rate when asked."""
    voice = Voice("pico", name)
    spoken = "how are you doing today my friend"
    render(voice, spoken, Prosody(), tmp_path / "own.wav")
    render(voice, spoken, Prosody(rate=1.2, pitch=0.6), tmp_path / "low.wav")
    own, low = _median_f0(tmp_path / "own.wav"), _median_f0(tmp_path / "low.wav")
    assert own > 160 and low < 0.8 * own, (own, low)
    assert sf.info(str(tmp_path / "low.wav")).duration < sf.info(str(tmp_path / "own.wav")).duration


def test_piper_speaks_as_a_man_follows_rate_and_refuses_pitch(tmp_path: Path) -> None:
    """Piper's neural voice is the only one of its kind in training: it must speak (a male
    voice), take a faster rate when asked, and refuse a pitch it cannot make."""
    voice = Voice("piper", "en_US-joe-medium")
    spoken = "how are you doing today my friend"
    render(voice, spoken, Prosody(rate=0.8), tmp_path / "slow.wav")
    render(voice, spoken, Prosody(rate=1.25), tmp_path / "fast.wav")
    assert 80 < _median_f0(tmp_path / "slow.wav") < 170
    # VITS draws its durations at random (a few percent apart run to run); the rates differ
    # by 1.56x and the durations come out ~0.82x apart
    slow, fast = (sf.info(str(tmp_path / f"{n}.wav")).duration for n in ("slow", "fast"))
    assert fast < 0.9 * slow, (slow, fast)
    with pytest.raises(ValueError, match="cannot change pitch"):
        render(voice, spoken, Prosody(pitch=1.2), tmp_path / "high.wav")


@pytest.mark.parametrize(
    ("engines", "voices"),
    [
        ("pico,piper,flite", {"pico:en-US", "pico:en-GB", "piper:en_US-joe-medium"}),
        ("rhvoice,flite", {"rhvoice:bdl", "rhvoice:clb"}),
    ],
)
def test_a_build_keeps_the_in_process_and_wine_engines_in_training_only(
    tmp_path: Path, engines: str, voices: set[str]
) -> None:
    args = _args(tmp_path)
    args.engines, args.renders = engines, 6  # every voice
    assert synth.main(args) == 0
    train = read_manifest(args.out / "train.jsonl", check_audio=True)
    dev_test = [u for s in ("dev", "test") for u in read_manifest(args.out / f"{s}.jsonl")]
    assert voices <= {u.voice for u in train}
    assert {u.voice for u in dev_test} <= {v.label for v in HELD_OUT}


@pytest.mark.parametrize(("name", "low", "high"), [("bdl", 80, 150), ("clb", 160, 260)])
def test_rhvoice_speaks_in_its_range_and_follows_rate_and_pitch(
    tmp_path: Path, name: str, low: float, high: float
) -> None:
    """bdl is a man and clb a woman (the second natural female family): each must sound so,
    and a lower pitch and faster rate must really come out lower and shorter."""
    voice, spoken = Voice("rhvoice", name), "how are you doing today my friend"
    render(voice, spoken, Prosody(), tmp_path / "own.wav")
    render(voice, spoken, Prosody(rate=1.25, pitch=0.75), tmp_path / "low.wav")
    own, lower = _median_f0(tmp_path / "own.wav"), _median_f0(tmp_path / "low.wav")
    assert low < own < high and lower < 0.85 * own, (own, lower)
    durations = [sf.info(str(tmp_path / f"{n}.wav")).duration for n in ("own", "low")]
    assert durations[1] < 0.85 * durations[0], durations


@pytest.mark.parametrize("name", ["slt", "alan"])
def test_rhvoice_refuses_the_held_out_speakers(tmp_path: Path, name: str) -> None:
    """RHVoice's slt and alan are the people behind the held-out voices: training on them
    would leak the test speakers into training."""
    with pytest.raises(ValueError, match="held-out speaker"):
        render(Voice("rhvoice", name), "hello there", Prosody(), tmp_path / "x.wav")


def test_rhvoice_batch_renders_the_rest_when_one_item_fails(tmp_path: Path) -> None:
    voice, ok = Voice("rhvoice", "clb"), ["a penny saved is a penny earned.", "good morning."]
    items = [
        (ok[0], Prosody(), tmp_path / "a.wav"),
        ("nobody hears this.", Prosody(), tmp_path / "missing" / "b.wav"),
        (ok[1], Prosody(rate=0.8, pitch=1.2), tmp_path / "c.wav"),
    ]
    failures = render_rhvoice(voice, items)
    assert list(failures) == [1] and "cannot write" in failures[1]
    for wav in (tmp_path / "a.wav", tmp_path / "c.wav"):
        info = sf.info(str(wav))
        assert info.samplerate == 24000 and info.duration > 0.5


def test_unknown_engine_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="use espeak-ng, flite, festival, pico, piper, rhvoice, kokoro"
    ):
        synth.SynthConfig(engines=("espeak-ng", "sapi"))


def test_harken_synth_with_a_misspelt_engine_says_so_in_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    synth.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path / "c"), "--engines", "espeak"])
    assert synth.main(args) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("harken synth: error: unknown engines ['espeak']") and "Traceback" not in err
    )
    assert not (tmp_path / "c").exists()  # nothing written


def test_a_missing_engine_names_the_setup_step(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr("shutil.which", lambda p: None if p == "flite" else real_which(p))
    monkeypatch.setattr("corpus.voices.pico_available", lambda: False)
    with pytest.raises(ValueError, match=r"flite \(no flite program\); pico .*make setup-synth"):
        synth.SynthConfig(engines=("flite", "pico"))


def test_rab_without_its_diphones_names_where_they_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("corpus.voices.FESTIVAL_RAB_DIR", tmp_path / "rab_diphone")
    with pytest.raises(ValueError, match=r"festival-rab \(needs festival and the rab diphones"):
        synth.SynthConfig(engines=("festival-rab", "flite"))
    with pytest.raises(RuntimeError, match="scripts/setup.sh --synth"):
        render(Voice("festival-rab", "rab_diphone"), "hello", Prosody(), tmp_path / "x.wav")


def test_excluded_transcripts_are_spoken_nowhere_in_the_new_corpus(tmp_path: Path) -> None:
    """A second corpus (another seed) must not train on the first one's dev/test sentences."""
    args = _args(tmp_path)
    with (tmp_path / "fortunes" / "tiny").open("a") as f:
        f.write("Every cloud has a silver lining.\n%\nFortune favours the bold.\n%\n")
    fox = normalise("The quick brown fox jumps over the lazy dog.").text
    first = tmp_path / "first_test.jsonl"
    first.write_text(json.dumps({"audio": "x.wav", "text": fox, "duration": 1.0}) + "\n")
    args.exclude = [first]
    assert synth.main(args) == 0
    spoken = {u.text for s in synth.SPLITS for u in read_manifest(args.out / f"{s}.jsonl")}
    assert spoken and fox not in spoken
    assert fox not in (args.out / "lm_text.txt").read_text()
    assert json.loads((args.out / "stats.json").read_text())["text"]["excluded"] == 1


def test_a_plan_names_what_a_corpus_would_speak_and_keeps_it_out_of_the_next(
    tmp_path: Path,
) -> None:
    """After a corpus's audio is gone, its seed still says which sentences it spoke."""
    args = _args(tmp_path)
    with (tmp_path / "fortunes" / "tiny").open("a") as f:
        f.write("Every cloud has a silver lining.\n%\nFortune favours the bold.\n%\n")
    args.plan_out = tmp_path / "plans" / "first.txt"
    args.train_hours = 0.0  # dev and test only: some of the five sentences
    assert synth.main(args) == 0
    assert not args.out.exists()  # nothing rendered
    plan = args.plan_out
    planned = plan.read_text().splitlines()
    assert 0 < len(planned) < 5
    args.plan_out = None
    assert synth.main(args) == 0  # the same seed renders what was planned
    rendered = {u.text for s in ("dev", "test") for u in read_manifest(args.out / f"{s}.jsonl")}
    assert rendered == set(planned)
    second = argparse.Namespace(**vars(args))
    second.out, second.exclude, second.seed = tmp_path / "second", [plan], 5
    second.train_hours = 0.01
    assert synth.main(second) == 0
    spoken = {u.text for s in synth.SPLITS for u in read_manifest(second.out / f"{s}.jsonl")}
    assert spoken and not spoken & set(planned)


def test_a_missing_exclude_manifest_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(tmp_path)
    args.exclude = [tmp_path / "nowhere.jsonl"]
    assert synth.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("harken synth: error: --exclude:") and "nowhere.jsonl" in err
    assert not args.out.exists()


def test_a_corpus_reads_plain_sentences_once_the_fortunes_are_spent(tmp_path: Path) -> None:
    args = _args(tmp_path)
    text = tmp_path / "more.txt"
    lines = ["Dr. Jones sold 12 apples at the market.", "A fine day for a walk in the park."]
    text.write_text(
        "\n".join([*lines, "", "too short", lines[1], "the third sentence here is new"])
    )
    args.sentences = [text]
    assert synth.main(args) == 0
    spoken = {u.text for s in synth.SPLITS for u in read_manifest(args.out / f"{s}.jsonl")}
    assert spoken == {normalise(x).text for x in [*lines, "the third sentence here is new"]}
    counts = json.loads((args.out / "stats.json").read_text())["text"]
    assert counts["kept"] == 3 and counts["dropped_too_short"] == 1
    assert counts["dropped_duplicate"] == 1


def test_an_unreadable_sentence_file_is_refused_in_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(tmp_path)
    args.sentences = [tmp_path / "missing.txt"]
    assert synth.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("harken synth: error: reading the text:") and "missing.txt" in err
