"""Training utterances re-voiced the way a statistical-parametric engine (flite's clustergen,
festival's HTS) would voice them, for evaluation: does that vocoder's mark make a heard voice
one the network has not heard?

flite's slt reads about 10 points worse than festival's slt HTS for harken *and* PocketSphinx
(the same woman, another engine), and flite's awb is the whole distance to PocketSphinx on the
TTS test. Clustergen's output is a low-order mel-cepstral envelope, smoothed over time by its
trajectory model, through an MLSA filter with a few bands of mixed excitation. Here: WORLD's
analysis, then the envelope cut to `ORDER` cepstral coefficients on a warped frequency axis and
averaged over `SMOOTH` frames, F0 smoothed likewise, aperiodicity averaged into five bands,
and WORLD's synthesis.

Needs pyworld (`pip install pyworld 'setuptools<81'`), not a dependency of the project.

Usage:
  python models/results/vocoder/revoice.py probe MANIFEST OUT_DIR N [VOICE_PREFIX ...]
    the first N utterances of each voice, re-voiced (OUT_DIR/manifest.jsonl) and as they were
    (OUT_DIR/orig.jsonl), to read with `harken eval --bundle models/default --manifest ...`
  python models/results/vocoder/revoice.py build MANIFEST OUT_DIR SHARE [WORKERS]
    a seeded SHARE of a training manifest re-voiced, each utterance at its own order (20-30)
    and smoothing (3-7 frames), as a training corpus (OUT_DIR/train.jsonl)
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile as sf

from models.manifest import read_manifest, write_manifest

F64 = npt.NDArray[np.float64]
ORDER = 25  # clustergen's 16 kHz voices keep 24-25 mel-cepstral coefficients
ALPHA = 0.42  # the all-pass constant of a 16 kHz mel-cepstrum
SMOOTH = 5  # frames of 5 ms: the trajectory model's over-smoothing
BANDS_HZ = (0, 1000, 2000, 4000, 6000, 8000)


def warped_axis(n_bins: int, sr: int) -> F64:
    """Where each bin of a mel-warped axis reads the linear one (a first-order all-pass)."""
    omega = np.linspace(0, np.pi, n_bins)
    warped = omega + 2 * np.arctan(ALPHA * np.sin(omega) / (1 - ALPHA * np.cos(omega)))
    return np.asarray(np.interp(omega, warped, omega) / np.pi * (sr / 2))


def smooth_envelope(sp: F64, sr: int, order: int = ORDER, smooth: int = SMOOTH) -> F64:
    """The envelope through a low-order cepstrum on the mel axis, then averaged over time."""
    n_bins = sp.shape[1]
    freqs = np.linspace(0, sr / 2, n_bins)
    on_mel = warped_axis(n_bins, sr)
    log_sp = np.log(np.maximum(sp, 1e-16))
    mel_log = np.stack([np.interp(on_mel, freqs, row) for row in log_sp])
    cep = np.fft.irfft(mel_log, axis=1)
    cep[:, order : -order + 1] = 0.0
    mel_smooth = np.fft.rfft(cep, axis=1).real
    kernel = np.ones(smooth) / smooth
    mel_smooth = np.apply_along_axis(lambda c: np.convolve(c, kernel, mode="same"), 0, mel_smooth)
    back = np.stack([np.interp(freqs, on_mel, row) for row in mel_smooth])
    return np.asarray(np.exp(back))


def banded(ap: F64, sr: int) -> F64:
    """Aperiodicity averaged into a few bands, as mixed excitation shapes it."""
    freqs = np.linspace(0, sr / 2, ap.shape[1])
    out = ap.copy()
    for lo, hi in zip(BANDS_HZ[:-1], BANDS_HZ[1:], strict=True):
        sel = (freqs >= lo) & (freqs <= hi)
        out[:, sel] = ap[:, sel].mean(axis=1, keepdims=True)
    return out


def revoice(wave: F64, sr: int, order: int = ORDER, smooth: int = SMOOTH) -> F64:
    pw = importlib.import_module("pyworld")
    f0, t = pw.dio(wave, sr, frame_period=5.0)
    f0 = pw.stonemask(wave, f0, t, sr)
    sp = pw.cheaptrick(wave, f0, t, sr)
    ap = pw.d4c(wave, f0, t, sr)
    voiced = f0 > 0
    if voiced.any():
        kernel = np.ones(smooth) / smooth
        log_f0 = np.where(voiced, np.log(np.maximum(f0, 1.0)), 0.0)
        num = np.convolve(log_f0, kernel, mode="same")
        den = np.convolve(voiced.astype(float), kernel, mode="same")
        f0 = np.where(voiced, np.exp(num / np.maximum(den, 1e-9)), 0.0)
    y = pw.synthesize(
        f0, smooth_envelope(sp, sr, order, smooth), banded(ap, sr), sr, frame_period=5.0
    )
    peak = float(np.max(np.abs(y))) or 1.0
    return np.asarray(y / peak * min(0.9, float(np.max(np.abs(wave))) or 0.9))


def probe(manifest: Path, out_dir: Path, n: int, prefixes: tuple[str, ...]) -> None:
    per_voice: dict[str, int] = {}
    chosen = []
    for u in read_manifest(manifest):  # the first n of each voice, so every voice is read alike
        v = u.voice or ""
        if v.startswith(prefixes or ("",)) and per_voice.get(v, 0) < n:
            per_voice[v] = per_voice.get(v, 0) + 1
            chosen.append(u)
    revoiced = []
    for i, u in enumerate(chosen):
        wave, sr = sf.read(u.audio, dtype="float64")
        y = revoice(wave, sr)
        dst = out_dir / f"{i:05d}.wav"
        sf.write(dst, y, sr, subtype="PCM_16")
        revoiced.append(dataclasses.replace(u, audio=dst, duration=len(y) / sr))
    write_manifest(out_dir / "manifest.jsonl", revoiced)
    write_manifest(out_dir / "orig.jsonl", chosen)
    print(f"{len(chosen)} utterances re-voiced into {out_dir}")


def _build_one(job: tuple[str, str, int, int]) -> float:
    src, dst, order, smooth = job
    if Path(dst).exists():  # a killed build resumes
        return float(sf.info(dst).duration)
    wave, sr = sf.read(src, dtype="float64")
    y = revoice(wave, sr, order, smooth)
    sf.write(dst + ".part.wav", y, sr, subtype="PCM_16")
    Path(dst + ".part.wav").rename(dst)
    return float(len(y) / sr)


def build(manifest: Path, out_dir: Path, share: float, workers: int) -> None:
    utts = read_manifest(manifest)
    rng = np.random.default_rng(0)
    keep = rng.random(len(utts)) < share
    orders = rng.integers(20, 31, len(utts))
    smooths = rng.integers(3, 8, len(utts))
    (out_dir / "wav").mkdir(parents=True, exist_ok=True)
    jobs, chosen = [], []
    for i, u in enumerate(utts):
        if keep[i]:
            dst = out_dir / "wav" / f"{i:06d}.wav"
            jobs.append((str(u.audio), str(dst), int(orders[i]), int(smooths[i])))
            chosen.append((u, dst))
    with multiprocessing.Pool(workers) as pool:
        durations = pool.map(_build_one, jobs, chunksize=16)
    revoiced = [
        dataclasses.replace(u, audio=dst, duration=d, voice=f"{u.voice or ''}+cg")
        for (u, dst), d in zip(chosen, durations, strict=True)
    ]
    write_manifest(out_dir / "train.jsonl", revoiced)
    print(f"{len(chosen)} of {len(utts)} utterances, {sum(durations) / 3600:.2f} h, in {out_dir}")


def main() -> None:
    mode, manifest, out_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out_dir.mkdir(parents=True, exist_ok=True)
    if mode == "probe":
        probe(manifest, out_dir, int(sys.argv[4]), tuple(sys.argv[5:]))
    elif mode == "build":
        build(manifest, out_dir, float(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 2)
    else:
        sys.exit(f"unknown mode {mode!r}: probe or build")


if __name__ == "__main__":
    main()
