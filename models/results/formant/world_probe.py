"""The first N training utterances re-voiced through the WORLD vocoder, for evaluation only
(models/results/formant.md): which changes of a training voice does the network already
shrug off, and which make it a voice it has not heard?

Modes: `resynth` (analysis and synthesis, nothing changed: the vocoder's own mark),
`revoice` (F0 times 0.6-1.7, the whole envelope warped by 0.85-1.2, more aperiodicity) and
`regions` (the envelope's regions each moved by their own factor, 0.8-1.25, at knots
around the formants; F0 kept).

Needs pyworld, which is not a dependency of the project (`pip install pyworld
'setuptools<81'`: its 0.3.5 imports pkg_resources).

Usage: python models/results/formant/world_probe.py MODE OUT_DIR [N]
then   harken eval --bundle models/default --manifest OUT_DIR/manifest.jsonl --out REPORT.json
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile as sf

KNOTS_HZ = np.array([0, 300, 700, 1200, 1800, 2600, 3500, 5000, 8000.0])


F64 = npt.NDArray[np.float64]


def envelope_at(sp: F64, src_hz: F64, sr: int) -> F64:
    """The log-interpolated envelope read at `src_hz` for every output bin."""
    freqs = np.linspace(0, sr / 2, sp.shape[1])
    return np.asarray(np.exp(np.stack([np.interp(src_hz, freqs, row) for row in np.log(sp)])))


def main() -> None:
    pw = importlib.import_module("pyworld")  # not a dependency of the project: see above
    mode, out, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 200
    (out / "wav").mkdir(parents=True, exist_ok=True)
    with open("data/corpus/train.jsonl") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(n), strict=False)]
    rng = np.random.default_rng(0)
    audio_s = cpu_s = 0.0
    with open(out / "manifest.jsonl", "w") as manifest:
        for i, row in enumerate(rows):
            x, sr = sf.read("data/corpus/" + row["audio"], dtype="float64")
            t0 = time.process_time()
            f0, t = pw.dio(x, sr, frame_period=5.0)
            f0 = pw.stonemask(x, f0, t, sr)
            sp, ap = pw.cheaptrick(x, f0, t, sr), pw.d4c(x, f0, t, sr)
            freqs = np.linspace(0, sr / 2, sp.shape[1])
            if mode == "revoice":
                f0 = f0 * rng.uniform(0.6, 1.7)
                sp = envelope_at(sp, freqs / rng.uniform(0.85, 1.2), sr)
                ap = np.clip(ap + rng.uniform(0, 0.3), 0, 1)
            elif mode == "regions":
                moved = KNOTS_HZ * np.exp(rng.uniform(np.log(0.8), np.log(1.25), len(KNOTS_HZ)))
                moved[0], moved[-1] = 0.0, sr / 2
                moved = np.maximum.accumulate(moved)
                sp = envelope_at(sp, np.interp(freqs, moved, KNOTS_HZ), sr)
            elif mode != "resynth":
                raise SystemExit(f"unknown mode {mode!r}: resynth, revoice or regions")
            y = pw.synthesize(*(np.ascontiguousarray(a) for a in (f0, sp, ap)), sr, 5.0)
            cpu_s += time.process_time() - t0
            audio_s += len(x) / sr
            wav = out / "wav" / f"{i:03d}.wav"
            sf.write(wav, (0.7 * y / max(1e-6, np.abs(y).max())).astype(np.float32), sr)
            line = {"audio": str(wav), "text": row["text"], "voice": row["voice"]}
            manifest.write(json.dumps(line) + "\n")
    print(f"{n} utterances, {audio_s:.0f} s of audio, {audio_s / cpu_s:.1f}x real time")


if __name__ == "__main__":
    main()
