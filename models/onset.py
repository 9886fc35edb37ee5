"""Speech onset gate: a stream's frames reach the model from just before speech starts.

The network learnt from utterances that start within a fraction of a second of speech. Fed
seconds of leading silence or faint noise (a microphone user who pauses before speaking, a
file with a quiet lead-in), its recurrent state drifts somewhere it never saw, the level
tracker locks onto the noise and boosts it to speech level, and the first words come out
wrong or hallucinated. The gate holds frames back until the level rises well above the
noise floor for a few frames, then releases them with a short pre-roll, so the model hears
what training showed it. It looks only backwards, frame by frame, so a stream fed in chunks
gates exactly as the whole signal does, and the frames it drops are counted so that
timestamps stay in stream time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

RISE_DB = 12.0  # speech: this far above the noise floor ...
ABSOLUTE_DB = -60.0  # ... and above this level (dBFS), whatever the floor
ONSET_FRAMES = 5  # ... for this many frames in a row (50 ms)
PREROLL_FRAMES = 20  # frames released from before the onset (0.2 s): a word's soft start
FLOOR_START_DB = -60.0  # the floor's first guess, so speech from the first frame opens it
NO_SIGNAL_DB = -90.0  # quieter frames (digital silence) say nothing about the noise floor
FLOOR_TIME_CONSTANT_S = 0.3  # how fast the floor follows the quiet frames


@dataclass
class OnsetGate:
    """One stream's gate; `push` its frames in order, any number at a time."""

    hop_s: float  # seconds per frame
    floor_db: float = FLOOR_START_DB
    run: int = 0  # loud frames in a row
    skipped: int = 0  # frames dropped for good (before the pre-roll)
    is_open: bool = False
    onset_db: float | None = None  # mean level of the frames that opened it
    _held: list[tuple[F32, float]] = field(default_factory=list)  # (frame, level)

    def push(self, logspec: F32, level_db: F32) -> tuple[F32, F32]:
        """Frames [t, F] with levels [t] in; the frames released so far out (same layout)."""
        if self.is_open:
            return logspec, level_db
        alpha = 1.0 - math.exp(-self.hop_s / FLOOR_TIME_CONSTANT_S)
        for i, level in enumerate(level_db.tolist()):
            self._held.append((logspec[i], level))
            if level > max(self.floor_db + RISE_DB, ABSOLUTE_DB):
                self.run += 1
            else:
                self.run = 0
                if level > NO_SIGNAL_DB:
                    self.floor_db += alpha * (level - self.floor_db)
            if len(self._held) > PREROLL_FRAMES + ONSET_FRAMES:
                self._held.pop(0)
                self.skipped += 1
            if self.run >= ONSET_FRAMES:
                return self._open(logspec[i + 1 :], level_db[i + 1 :])
        return logspec[:0], level_db[:0]

    def _open(self, rest: F32, rest_levels: F32) -> tuple[F32, F32]:
        self.is_open = True
        self.onset_db = float(np.mean([lv for _, lv in self._held[-ONSET_FRAMES:]]))
        held = np.stack([f for f, _ in self._held]).astype(np.float32)
        levels = np.array([lv for _, lv in self._held], np.float32)
        self._held = []
        return np.concatenate([held, rest]), np.concatenate([levels, rest_levels])

    @property
    def skipped_s(self) -> float:
        """Seconds of the stream's start that the model never saw."""
        return self.skipped * self.hop_s
