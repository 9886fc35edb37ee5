"""Audio files as training reads them: mono float32 at the features' sample rate.

Below both `training/data.py` (the dataset) and `training/teacher.py` (the teacher's targets,
which the dataset reads), so neither has to import the other for it.
"""

from __future__ import annotations

import numpy as np
import soundfile as sf
import soxr

from training.augment import F32, SAMPLE_RATE


def load_audio(path: str, sample_rate: int = SAMPLE_RATE) -> F32:
    """Mono float32 at `sample_rate`, whatever the file's rate and channels."""
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if rate != sample_rate:
        mono = soxr.resample(mono, rate, sample_rate, quality="HQ")
    return np.ascontiguousarray(mono, dtype=np.float32)
