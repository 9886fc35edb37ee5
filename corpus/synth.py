"""`harken synth`: a speech corpus from fortune sentences and seven TTS engines' voices.

One command builds `train.jsonl` (training voices), `dev.jsonl` and `test.jsonl` (held-out
voices on held-out sentences), `lm_text.txt` (every sentence except dev and test) and
`stats.json`. The plan is a pure function of the seed and the fortune files, and finished
WAVs are skipped, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from tqdm import tqdm

from corpus import fortunes, kokoro, voices
from corpus.text import Normalised
from corpus.voices import Prosody, Voice
from models.manifest import Utterance, read_manifest, write_manifest

SAMPLE_RATE = 16000
SPLITS = ("train", "dev", "test")
SECONDS_PER_WORD = 0.36  # planning estimate at the engines' default rate; stats use real sizes
# Share of training utterances per voice family: espeak-ng has the most speakers and accents;
# the natural-sounding flite, festival, pico, piper, rhvoice and kokoro voices are closest to
# the held-out ones. Rhvoice's bdl and clb are CMU ARCTIC speakers, as the held-out slt and awb
# are, rendered by an HTS-style engine. Kokoro brings 18 natural neural speakers (twelve women,
# four men and two in between, at 150-160 Hz): a quarter of the corpus, the other six
# families keeping their earlier shares (0.24, 0.2, 0.14, 0.16, 0.11, 0.15) scaled by 0.75
# (the shares renormalise over enabled engines).
FAMILY_WEIGHTS = {
    "espeak": 0.18,
    "flite": 0.15,
    "festival": 0.105,
    "pico": 0.12,
    "piper": 0.0825,
    "rhvoice": 0.1125,
    "kokoro": 0.25,
    "kokoro_accent": 0.25,  # only when asked for (voices.DEFAULT_ENGINES leaves it out)
    "kokoro_en": 0.25,  # likewise
    "kokoro_en_mix": 0.25,  # likewise
    "kokoro_en_mix2": 0.25,  # likewise
    "festival_rab": 0.25,  # likewise
}
# one process a batch: start-up costs more than a sentence
BATCHED_ENGINES = ("festival", "festival-rab", "rhvoice")
HIGH_PITCH_SHARE = 0.4  # diphone renders at 1.6-2.1x their pitch (female range)
HIGH_PITCH_VOICES = {
    "flite:kal",
    "flite:kal16",
    "festival:kal_diphone",
    "festival:ked_diphone",
    "festival-rab:rab_diphone",
}


@dataclass(frozen=True)
class Job:
    split: str  # "train", "dev" or "test"
    voice: Voice
    prosody: Prosody
    text: str  # transcript
    spoken: str  # what the engine is told

    @property
    def path(self) -> Path:
        """Relative WAV path, named by a hash of everything that changes the audio."""
        key = f"{self.voice.label}|{self.prosody}|{self.spoken}".encode()
        return Path("wav", self.split, self.voice.slug, hashlib.sha1(key).hexdigest()[:16] + ".wav")


@dataclass(frozen=True)
class SynthConfig:
    train_hours: float = 12.0  # planned training speech (estimated from word counts)
    dev_minutes: float = 25.0  # planned dev speech, held-out voices
    test_minutes: float = 25.0  # planned test speech, held-out voices
    renders: int = 1  # training voices per sentence; >1 trades text variety for speakers
    seed: int = 0
    engines: tuple[str, ...] = voices.DEFAULT_ENGINES  # which engines to use
    limit_sentences: int = 0  # use only this many sentences (0: all), for quick tests
    max_seconds: float = 20.0  # longer renders (a 300-letter chemical name) stay out of manifests

    def __post_init__(self) -> None:
        if self.train_hours < 0 or self.dev_minutes < 0 or self.test_minutes < 0:
            raise ValueError("train_hours, dev_minutes and test_minutes must be >= 0")
        if self.renders < 1 or self.max_seconds <= 0:
            raise ValueError("renders must be >= 1 and max_seconds > 0")
        if unknown := set(self.engines) - set(voices.ENGINES):
            raise ValueError(f"unknown engines {sorted(unknown)}; use {', '.join(voices.ENGINES)}")
        missing = [f"{e} ({why})" for e in self.engines if (why := _missing(e))]
        if missing:
            raise ValueError(
                f"engines not installed: {'; '.join(missing)}. `make setup-synth` "
                "(scripts/setup.sh --synth) installs every engine"
            )


def _missing(engine: str) -> str | None:
    """What an engine lacks on this machine, or None when it can render."""
    programs = {"espeak-ng": "espeak-ng", "flite": "flite", "festival": "text2wave"}
    if engine in programs:
        return None if shutil.which(programs[engine]) else f"no {programs[engine]} program"
    checks = {
        "festival-rab": (
            voices.festival_rab_available,
            f"needs festival and the rab diphones in {voices.FESTIVAL_RAB_DIR}",
        ),
        "pico": (voices.pico_available, "needs the ttspico package"),
        "piper": (voices.piper_available, "needs piper-tts and its voice package"),
        "rhvoice": (
            voices.rhvoice_available,
            f"needs wine, RHVoice.dll, its bdl/clb data and rhsay.exe in {voices.RHVOICE_DIR}",
        ),
    }
    if engine == "kokoro-accent" and not shutil.which("espeak-ng"):
        return "no espeak-ng program (it writes the accents' phonemes)"
    if engine in voices.KOKORO_ENGINES:
        if not voices.kokoro_available():
            return f"needs {', '.join(kokoro.missing_packages())}"
        if engine in voices.KOKORO_EN_NAMES and (missing := kokoro.english_missing()):
            return f"no English voice packs ({len(missing)} missing) in {kokoro.english_dir()}"
        return None
    available, why = checks[engine]
    return None if available() else why


def training_voices(engines: Sequence[str]) -> tuple[list[Voice], list[float]]:
    """Training voices and their sampling weights (each family's share split evenly)."""
    families = {
        "espeak": voices.TRAIN_ESPEAK,
        "flite": voices.TRAIN_FLITE,
        "festival": voices.TRAIN_FESTIVAL,
        "festival_rab": voices.TRAIN_FESTIVAL_RAB,
        "pico": voices.TRAIN_PICO,
        "piper": voices.TRAIN_PIPER,
        "rhvoice": voices.TRAIN_RHVOICE,
        "kokoro": voices.TRAIN_KOKORO,
        "kokoro_accent": voices.TRAIN_KOKORO_ACCENT,
        "kokoro_en": voices.TRAIN_KOKORO_EN,
        "kokoro_en_mix": voices.TRAIN_KOKORO_EN_MIX,
        "kokoro_en_mix2": voices.TRAIN_KOKORO_EN_MIX2,
    }
    pool, weights = [], []
    for family, members in families.items():
        usable = [v for v in members if v.engine in engines]
        if not usable:
            continue
        pool += usable
        weights += [FAMILY_WEIGHTS[family] / len(usable)] * len(usable)
    if not pool:
        raise ValueError(f"no training voices for engines {list(engines)}")
    return pool, weights


def _take(sentences: list[Normalised], start: int, seconds: float) -> int:
    """Index after the sentences (from `start`) whose estimated speech fills `seconds`."""
    total, i = 0.0, start
    while i < len(sentences) and (total < seconds or i == start) and seconds > 0:
        total += sentences[i].words * SECONDS_PER_WORD
        i += 1
    return i


def plan(sentences: list[Normalised], cfg: SynthConfig) -> list[Job]:
    """Every utterance of the corpus: deterministic given the sentences and the seed."""
    rng = random.Random(cfg.seed)
    order = list(sentences)
    rng.shuffle(order)
    dev_end = _take(order, 0, cfg.dev_minutes * 60)
    test_end = _take(order, dev_end, cfg.test_minutes * 60)
    held = [v for v in voices.HELD_OUT if v.engine in cfg.engines]
    if not held:
        raise ValueError("dev and test need a held-out voice; enable flite or festival")
    jobs = [
        Job("dev" if i < dev_end else "test", held[i % len(held)], Prosody(), s.text, s.spoken)
        for i, s in enumerate(order[:test_end])
    ]
    pool, weights = training_voices(cfg.engines)
    budget = cfg.train_hours * 3600
    for s in order[test_end:]:
        if budget <= 0:
            break
        for voice in _distinct(rng, pool, weights, cfg.renders):
            prosody = Prosody(rate=rng.uniform(0.8, 1.25), pitch=_pitch(rng, voice))
            jobs.append(Job("train", voice, prosody, s.text, s.spoken))
            budget -= s.words * SECONDS_PER_WORD / prosody.rate
    return jobs


def _pitch(rng: random.Random, voice: Voice) -> float:
    """Relative pitch: around the voice's own, and for the (all male) diphone voices a share
    in the female range, where pico's two women, rhvoice's clb and kokoro's women are the
    only natural ones (flite's clustergen `rms` ignores pitch settings; the trainer's
    frequency warp covers it).
    Piper's and kokoro's neural voices have no pitch control (kokoro's pitch comes with each
    voice's style): always 1.0, so the manifest says what it got."""
    if voice.engine in ("piper", *voices.KOKORO_ENGINES):
        return 1.0
    if voice.label in HIGH_PITCH_VOICES and rng.random() < HIGH_PITCH_SHARE:
        return rng.uniform(1.6, 2.1)
    return rng.uniform(0.75, 1.3)


def _distinct(rng: random.Random, pool: list[Voice], weights: list[float], k: int) -> list[Voice]:
    chosen: list[Voice] = []
    while len(chosen) < min(k, len(pool)):
        v = rng.choices(pool, weights)[0]
        if v not in chosen:
            chosen.append(v)
    return chosen


def render_batch(out_dir: Path, jobs: list[Job]) -> list[tuple[Job, str]]:
    """Render jobs of one voice into `out_dir`; returns (job, error) for the ones that failed."""
    tmp = out_dir / "tmp" / str(os.getpid())
    tmp.mkdir(parents=True, exist_ok=True)
    raw = [tmp / f"{i}.wav" for i in range(len(jobs))]
    errors = _synthesise(jobs, raw)
    failed = []
    for i, (job, r) in enumerate(zip(jobs, raw, strict=True)):
        try:
            if i in errors:
                raise RuntimeError(errors[i])
            to_16k_wav(r, out_dir / job.path)
        except Exception as e:  # one bad sentence must not stop the build; count it instead
            failed.append((job, str(e)))
        r.unlink(missing_ok=True)
    return failed


def _synthesise(jobs: list[Job], raw: list[Path]) -> dict[int, str]:
    """Run the engine; festival and rhvoice render the whole batch in one process."""
    voice = jobs[0].voice
    if voice.engine in BATCHED_ENGINES:
        items = [(j.spoken, j.prosody, r) for j, r in zip(jobs, raw, strict=True)]
        try:
            if voice.engine == "rhvoice":
                return voices.render_rhvoice(voice, items)  # failed items, the rest rendered
            voices.render_festival(voice, items)
        except Exception as e:
            return dict.fromkeys(range(len(jobs)), str(e))
        return {}
    errors = {}
    for i, (job, r) in enumerate(zip(jobs, raw, strict=True)):
        try:
            voices.render(job.voice, job.spoken, job.prosody, r)
        except Exception as e:
            errors[i] = str(e)
    return errors


def to_16k_wav(src: Path, dst: Path) -> None:
    """Engine output (8 to 48 kHz) to 16 kHz mono 16-bit PCM, peak-normalised, written atomically."""
    audio, rate = sf.read(src, dtype="float32", always_2d=True)
    audio = audio.mean(axis=1)
    if rate != SAMPLE_RATE:
        audio = soxr.resample(audio, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    peak = float(np.abs(audio).max()) if audio.size else 0.0
    if audio.size < SAMPLE_RATE // 4 or peak < 1e-4:
        raise ValueError(f"engine produced {audio.size} samples, peak {peak:.1e}: no speech")
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    sf.write(part, audio * (0.9 / peak), SAMPLE_RATE, subtype="PCM_16", format="WAV")
    os.replace(part, dst)


def batches(jobs: list[Job], size: int) -> list[list[Job]]:
    """Jobs grouped by voice, `size` at a time (festival and rhvoice pay their start-up once a
    batch, so theirs are bigger)."""
    by_voice: dict[Voice, list[Job]] = defaultdict(list)
    for job in jobs:
        by_voice[job.voice].append(job)
    out = []
    for group in by_voice.values():
        step = size * 4 if group[0].voice.engine in BATCHED_ENGINES else size
        out += [group[i : i + step] for i in range(0, len(group), step)]
    random.Random(0).shuffle(out)  # mix slow and fast engines so the bar's ETA is honest
    return out


def render_all(out_dir: Path, jobs: list[Job], workers: int) -> list[tuple[Job, str]]:
    """Render the jobs whose WAV is missing, on `workers` processes, with a progress bar."""
    todo = [j for j in jobs if not (out_dir / j.path).is_file()]
    print(f"[synth] {len(jobs) - len(todo)} of {len(jobs)} utterances already rendered", flush=True)
    failed: list[tuple[Job, str]] = []
    work = batches(todo, size=8)
    with (
        multiprocessing.get_context("fork").Pool(workers, initializer=_fresh_worker) as pool,
        tqdm(total=len(todo), unit="utt", smoothing=0.05, mininterval=2.0) as bar,
    ):
        for batch_failed, n in pool.imap_unordered(_render_counted, [(out_dir, b) for b in work]):
            failed += batch_failed
            bar.update(n)
    return failed


def _fresh_worker() -> None:
    voices.forget_engines()
    kokoro.forget()


def _render_counted(arg: tuple[Path, list[Job]]) -> tuple[list[tuple[Job, str]], int]:
    out_dir, batch = arg
    return render_batch(out_dir, batch), len(batch)


def exclude(sentences: list[Normalised], manifests: Sequence[Path]) -> tuple[list[Normalised], int]:
    """The sentences whose transcript is in none of `manifests`, and how many were dropped.

    A second corpus built with another seed draws its own dev/test from the same fortunes, so
    its training sentences would include the first corpus's held-out ones: a model trained on
    both would have read (in other voices) the text it is scored on. Excluding the first
    corpus's dev and test manifests keeps them unseen; excluding its train manifest as well
    makes every sentence new text. A `.txt` path is a plan from `--plan-out`: what a corpus
    was asked to speak, which can be recomputed from its seed after its audio is gone."""
    banned: set[str] = set()
    for manifest in manifests:
        if manifest.suffix == ".txt":  # a plan written by --plan-out: one transcript a line
            lines = manifest.read_text(encoding="utf-8").splitlines()
            banned |= {line.strip() for line in lines if line.strip()}
        else:
            banned |= {u.text for u in read_manifest(manifest)}
    kept = [s for s in sentences if s.text not in banned]
    return kept, len(sentences) - len(kept)


def write_outputs(
    out_dir: Path, jobs: list[Job], sentences: list[Normalised], max_seconds: float
) -> dict[str, object]:
    """Manifests of the rendered utterances, LM text without dev/test sentences; returns stats."""
    seconds: dict[str, Counter[str]] = defaultdict(Counter)
    rows: dict[str, list[Utterance]] = defaultdict(list)
    too_long: Counter[str] = Counter()
    for job in jobs:
        wav = out_dir / job.path
        if not wav.is_file():
            continue
        info = sf.info(str(wav))
        duration = info.frames / info.samplerate
        if duration > max_seconds:
            too_long[job.split] += 1
            continue
        rows[job.split].append(Utterance(wav, job.text, duration, job.voice.label))
        seconds[job.split][job.voice.label] += duration
    for split in SPLITS:
        write_manifest(out_dir / f"{split}.jsonl", rows[split])
    held_text = {j.text for j in jobs if j.split != "train"}
    lm = [s.text for s in sentences if s.text not in held_text]
    (out_dir / "lm_text.txt").write_text("".join(t + "\n" for t in lm), encoding="utf-8")
    return {
        split: {
            "utterances": len(rows[split]),
            "dropped_too_long_audio": too_long[split],
            "hours": round(sum(seconds[split].values()) / 3600, 3),
            "hours_per_voice": {v: round(s / 3600, 4) for v, s in sorted(seconds[split].items())},
        }
        for split in SPLITS
    } | {"lm_sentences": len(lm)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SynthConfig()
    parser.add_argument("--out", type=Path, default=Path("data/corpus"), help="output directory")
    parser.add_argument(
        "--fortunes", type=Path, default=fortunes.FORTUNE_DIR, help="fortune files to read"
    )
    parser.add_argument(
        "--sentences",
        type=Path,
        nargs="*",
        default=[],
        help="read these files of one sentence a line instead of the fortunes",
    )
    parser.add_argument(
        "--train-hours", type=float, default=d.train_hours, help="planned training speech"
    )
    parser.add_argument("--dev-minutes", type=float, default=d.dev_minutes, help="held-out")
    parser.add_argument("--test-minutes", type=float, default=d.test_minutes, help="held-out")
    parser.add_argument("--renders", type=int, default=d.renders, help="voices per train sentence")
    parser.add_argument("--seed", type=int, default=d.seed, help="same seed and args: resume")
    parser.add_argument("--engines", default=",".join(d.engines), help="comma-separated engines")
    parser.add_argument("--max-seconds", type=float, default=d.max_seconds, help="longest audio")
    parser.add_argument("--limit-sentences", type=int, default=0, help="0: all sentences")
    parser.add_argument(
        "--exclude",
        type=Path,
        nargs="*",
        default=[],
        help="manifests (or --plan-out .txt plans) whose transcripts this corpus must not speak",
    )
    parser.add_argument(
        "--plan-out",
        type=Path,
        help="only write the planned transcripts (every split, one a line) here; render nothing",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes")


def main(args: argparse.Namespace) -> int:
    try:  # a misspelt engine or a missing install is named in a line, not a traceback
        cfg = SynthConfig(
            train_hours=args.train_hours,
            dev_minutes=args.dev_minutes,
            test_minutes=args.test_minutes,
            renders=args.renders,
            seed=args.seed,
            engines=tuple(e.strip() for e in args.engines.split(",") if e.strip()),
            limit_sentences=args.limit_sentences,
            max_seconds=args.max_seconds,
        )
    except ValueError as e:
        print(f"harken synth: error: {e}", file=sys.stderr)
        return 2
    started = time.time()
    try:
        if args.sentences:
            sentences, text_counts = fortunes.collect_lines(args.sentences, fortunes.TextConfig())
        else:
            files = fortunes.fortune_files(args.fortunes)
            sentences, text_counts = fortunes.collect(files, fortunes.TextConfig())
    except (OSError, UnicodeDecodeError) as e:
        print(f"harken synth: error: reading the text: {e}", file=sys.stderr)
        return 2
    if args.exclude:
        try:
            sentences, text_counts["excluded"] = exclude(sentences, args.exclude)
        except (OSError, ValueError) as e:
            print(f"harken synth: error: --exclude: {e}", file=sys.stderr)
            return 2
    if cfg.limit_sentences:
        sentences = sentences[: cfg.limit_sentences]
    print(f"[synth] {len(sentences)} sentences; text: {dict(text_counts)}", flush=True)
    jobs = plan(sentences, cfg)
    if args.plan_out:  # the sentences a corpus speaks, as a later --exclude reads them
        args.plan_out.parent.mkdir(parents=True, exist_ok=True)
        planned = dict.fromkeys(j.text for j in jobs)
        args.plan_out.write_text("".join(t + "\n" for t in planned), encoding="utf-8")
        print(f"[synth] plan: {len(jobs)} utterances, {len(planned)} sentences -> {args.plan_out}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    failed = render_all(args.out, jobs, max(1, args.workers))
    shutil.rmtree(args.out / "tmp", ignore_errors=True)
    stats = write_outputs(args.out, jobs, sentences, cfg.max_seconds)
    stats |= {
        "text": dict(text_counts),
        "render_failed": len(failed),
        "render_failures": [
            f"{j.voice.label}: {j.spoken[:60]!r}: {e[:200]}" for j, e in failed[:20]
        ],
        "config": asdict(cfg),
        "build_seconds": round(time.time() - started, 1),
    }
    (args.out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    for split in SPLITS:
        print(f"[synth] {split}: {json.dumps(stats[split])[:300]}", flush=True)
    if failed:
        print(f"[synth] {len(failed)} utterances failed to render; see stats.json", file=sys.stderr)
    return 0
