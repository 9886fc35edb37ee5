"""`/v1/realtime?intent=transcription` as OpenAI's Realtime clients speak it, one utterance at
real time, measured like loadtest/client.py's `/v1/stream` client and reported in the same
`UtteranceResult`.

The client waits for `session.created`, sends a `session.update` (24 kHz PCM16, OpenAI's one
rate, and turn detection off: it commits the turn itself, as a /v1/stream client ends with
eos), then the utterance in `chunk_ms` pieces, base64 in `input_audio_buffer.append` events,
on the live schedule, then `input_audio_buffer.commit`. Latency: commit sent -> the item's
`...input_audio_transcription.completed` received (eos -> final on /v1/stream); its deltas
count as partials (time to first partial, gaps). An utterance at another rate is resampled to
24 kHz once, before its connection opens. The events are read as plain JSON: loadtest imports
no server module but server.protocol, and these shapes are OpenAI's (docs/realtime.md).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import time
from dataclasses import dataclass, field

import numpy as np
import soxr
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from loadtest.client import ClientConfig, Utterance, UtteranceResult, describe
from loadtest.protocols import paced, ws_utterance

REALTIME_PATH = "/v1/realtime?intent=transcription"
RATE = 24000  # Hz: OpenAI's PCM rate
DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"
SESSION = json.dumps(
    {
        "type": "session.update",
        "session": {
            "type": "transcription",
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": RATE}, "turn_detection": None}
            },
        },
    }
)
COMMIT = json.dumps({"type": "input_audio_buffer.commit"})


@functools.lru_cache(maxsize=1024)
def at_24k(utt: Utterance) -> Utterance:
    """The utterance as OpenAI's clients send it: PCM16 at 24 kHz."""
    if utt.sample_rate == RATE:
        return utt
    audio = np.frombuffer(utt.pcm, "<i2").astype(np.float32) / 32768
    resampled = np.clip(soxr.resample(audio, utt.sample_rate, RATE), -1, 32767 / 32768)
    return Utterance((resampled * 32768).astype("<i2").tobytes(), RATE, utt.text, utt.name)


@dataclass
class _Timeline:
    deltas: list[float] = field(default_factory=list)  # when each delta came
    commit_at: float | None = None
    completed_at: float | None = None
    transcript: str | None = None
    error: str | None = None  # a server error event or an abnormal close


async def realtime_utterance(config: ClientConfig, utt: Utterance) -> UtteranceResult:
    """Send one utterance to /v1/realtime at real time x speed, resampled to 24 kHz first."""
    return await ws_utterance(config, REALTIME_PATH, utt, _realtime, at_24k(utt))


async def _realtime(
    ws: ClientConnection, config: ClientConfig, utt: Utterance, result: UtteranceResult
) -> None:
    seen = _Timeline()
    receiver = asyncio.create_task(_receive(ws, seen))
    first_sent = None
    try:
        try:
            await ws.send(SESSION)
            async for frame in paced(utt, config):
                if receiver.done():
                    break
                await asyncio.wait_for(ws.send(_append(frame)), config.final_timeout_s)
                first_sent = first_sent or time.perf_counter()
            if not receiver.done():
                seen.commit_at = time.perf_counter()
                await ws.send(COMMIT)
        except ConnectionClosed:
            pass  # the receiver saw why
        await asyncio.wait_for(receiver, config.final_timeout_s)
    except TimeoutError:
        result.failure = f"timeout: no final within {config.final_timeout_s:g} s of the commit"
        return
    finally:
        receiver.cancel()
    _fill(result, seen, first_sent)


def _append(pcm: bytes) -> str:
    audio = base64.b64encode(pcm).decode()
    return json.dumps({"type": "input_audio_buffer.append", "audio": audio})


async def _receive(ws: ClientConnection, seen: _Timeline) -> None:
    """Events until the item's completed transcript, an error event, or the close."""
    try:
        async for raw in ws:
            now = time.perf_counter()
            event = json.loads(raw)
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == DELTA and isinstance(event.get("delta"), str):
                seen.deltas.append(now)
            elif kind == COMPLETED and isinstance(event.get("transcript"), str):
                seen.transcript, seen.completed_at = event["transcript"], now
                return
            elif kind == "error" and isinstance(event.get("error"), dict):
                error = event["error"]
                seen.error = f"server error {error.get('code')}: {error.get('message')}"
                return
            elif not isinstance(kind, str) or kind in (DELTA, COMPLETED):
                raise ValueError(f"not an event of OpenAI's Realtime API: {str(raw)[:80]}")
        seen.error = f"closed {ws.close_code}: {ws.close_reason}"
    except ConnectionClosed as e:
        seen.error = describe(e)
    except ValueError as e:  # bad JSON or an event without its fields
        seen.error = f"bad message from the server: {e}"


def _fill(result: UtteranceResult, seen: _Timeline, first_sent: float | None) -> None:
    if seen.transcript is None or seen.completed_at is None or seen.commit_at is None:
        result.failure = seen.error or "closed by the server before the final"
        return
    result.hypothesis = seen.transcript
    result.eou_latency_ms = (seen.completed_at - seen.commit_at) * 1000
    if seen.deltas and first_sent is not None:
        result.first_partial_ms = (seen.deltas[0] - first_sent) * 1000
    times = seen.deltas
    result.partial_gaps_ms = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
