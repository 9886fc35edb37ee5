"""TTS dev under noise: each clip of a manifest with coloured noise (spectral slope drawn from
white to brown) at one fixed signal-to-noise ratio, seeded, so that a model trained with
less noise can be checked for what it gave up.

    python models/results/light5/noisy_dev.py data/corpus/dev.jsonl data/noisy_dev 10
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from models.manifest import Utterance, read_manifest, write_manifest
from training.augment import add_noise, coloured_noise
from training.data import load_audio


def main(manifest: str, out: str, snr_db: str) -> None:
    rng = np.random.default_rng(10)
    wav = Path(out) / "wav"
    wav.mkdir(parents=True, exist_ok=True)
    noisy = []
    for utt in read_manifest(manifest):
        audio = load_audio(str(utt.audio))
        noise = coloured_noise(len(audio), rng.uniform(0.0, 2.0), rng)
        mixed = np.clip(add_noise(audio, noise, float(snr_db)), -1.0, 1.0)
        path = wav / Path(utt.audio).parent.name / Path(utt.audio).name
        path.parent.mkdir(exist_ok=True)
        sf.write(path, mixed, 16000, subtype="PCM_16")
        noisy.append(Utterance(path.resolve(), utt.text, utt.duration, utt.voice))
    write_manifest(Path(out) / "dev.jsonl", noisy)
    print(f"{len(noisy)} clips at {snr_db} dB into {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
