"""G.711 (ITU-T, 1972): 8 kHz telephone audio, one byte a sample, μ-law or A-law.

OpenAI's Realtime API takes it as `audio/pcmu` and `audio/pcma` (the beta's `g711_ulaw`
and `g711_alaw`), which is what telephony gateways (Twilio, Asterisk) send as they get it.
Each byte expands to a 14-bit (μ-law) or 13-bit (A-law) linear value, here scaled as
16-bit PCM is and then to float32 in [-1, 1], so the rest of the path is the one PCM takes.
Any byte is a valid sample: there is nothing to refuse.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
Law = Literal["audio/pcmu", "audio/pcma"]
RATE = 8000  # G.711's sample rate, Hz


def _mu_law() -> npt.NDArray[np.int16]:
    """The 16-bit value of each μ-law byte: bits are inverted on the wire; then a sign, a
    3-bit segment and a 4-bit step, offset by the bias of 0x84 that keeps segment 0 linear."""
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    segment, step = (code >> 4) & 0x07, code & 0x0F
    magnitude = (((step << 3) + 0x84) << segment) - 0x84
    return np.where(code & 0x80, -magnitude, magnitude).astype(np.int16)


def _a_law() -> npt.NDArray[np.int16]:
    """The 16-bit value of each A-law byte: even bits are inverted on the wire (0x55); then
    a sign (set: positive), a segment and a step; segment 0 is linear, the others double."""
    code = np.arange(256, dtype=np.int32) ^ 0x55
    segment, step = (code >> 4) & 0x07, code & 0x0F
    magnitude = np.where(
        segment == 0, (step << 4) + 8, ((step << 4) + 0x108) << np.maximum(segment - 1, 0)
    )
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.int16)


# each law's 256 values, as float32 samples; tables of 1 kB, built at import
_TABLES: dict[str, F32] = {
    "audio/pcmu": _mu_law().astype(np.float32) / np.float32(32768.0),
    "audio/pcma": _a_law().astype(np.float32) / np.float32(32768.0),
}


def decode_g711(data: bytes, law: Law) -> F32:
    """G.711 bytes -> float32 samples in [-1, 1] at 8 kHz."""
    return _TABLES[law][np.frombuffer(data, np.uint8)]
