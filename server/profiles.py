"""A speaker's profile as a token that a client keeps and brings back to a later stream.

A stream that adapts to its speaker fits the profile from its own audio, and is heard
through it only once enough audio has come (models/input_adaptation.py ProfileSchedule).
A client that keeps the token from `{"type": "speaker_profile"}` and sends it in the next
stream's config is heard through it from that stream's first word.

A profile is a gain and an offset per warp candidate and feature bin of one network: from
any other network it would be noise that reads as a profile. So the token names the network
it was fitted for (a digest of its weights file) and is refused with a reason elsewhere.

Layout, base64url without padding: b"HKP1", 8 bytes of the network's digest, candidates and
bins as little-endian uint16, then gain and offset as little-endian float32.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from pathlib import Path

import numpy as np

from models.input_adaptation import InputTransforms

MAGIC = b"HKP1"
_HEAD = struct.Struct("<4s8sHH")
MAX_TOKEN_CHARS = 16384  # 8 candidates of 256 bins, and room to spare


class ProfileError(ValueError):
    """A token that is not a profile of this server's network; the message says why."""


def network_digest(weights: str | Path) -> bytes:
    """8 bytes that name a network: a digest of its weights file."""
    h = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()[:8]


def encode_profile(profile: InputTransforms, digest: bytes) -> str:
    candidates, bins = profile.gain.shape
    body = _HEAD.pack(MAGIC, digest, candidates, bins)
    body += np.ascontiguousarray(profile.gain, "<f4").tobytes()
    body += np.ascontiguousarray(profile.offset, "<f4").tobytes()
    return base64.urlsafe_b64encode(body).rstrip(b"=").decode("ascii")


def decode_profile(token: str, digest: bytes, candidates: int, bins: int) -> InputTransforms:
    """The profile in `token`, checked to be one of the network `digest` names, with its
    shape; a ProfileError that says what is wrong otherwise."""
    if len(token) > MAX_TOKEN_CHARS:
        raise ProfileError(f"a profile token is at most {MAX_TOKEN_CHARS} characters")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise ProfileError("not a profile token (not base64url)") from None
    if len(raw) < _HEAD.size or raw[:4] != MAGIC:
        raise ProfileError("not a profile token (send back the `profile` of a speaker_profile)")
    _, named, k, f = _HEAD.unpack_from(raw)
    if named != digest:
        raise ProfileError(
            "this profile was fitted for another model; it cannot apply here (start without "
            "it, and the stream fits a new one)"
        )
    if (k, f) != (candidates, bins):
        raise ProfileError(f"profile of {k} x {f}, this model needs {candidates} x {bins}")
    if len(raw) - _HEAD.size != 8 * k * f:
        raise ProfileError("the profile token is cut short or too long")
    values = np.frombuffer(raw, "<f4", offset=_HEAD.size)
    if not np.isfinite(values).all():
        raise ProfileError("the profile holds values that are not finite numbers")
    gain, offset = values[: k * f].reshape(k, f), values[k * f :].reshape(k, f)
    return InputTransforms(gain.astype(np.float32), offset.astype(np.float32))
