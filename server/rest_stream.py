"""`stream=true` on `POST /v1/audio/transcriptions`: OpenAI's server-sent events.

    data: {"type": "transcript.text.delta", "delta": "the weather"}
    data: {"type": "transcript.text.delta", "delta": " is nice today"}
    data: {"type": "transcript.text.done", "text": "the weather is nice today"}

The file runs through a session in steps as a live stream does, and each delta is what
the partials' `stable` words add (the decoder never takes those back), then what the final
adds to them: the deltas add up to the final text. Errors found before the first event
(format, size, length, capacity) are ordinary HTTP errors; one after it is an event in
OpenAI's error shape, which OpenAI's client raises as an APIError.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from models.input_adaptation import InputTransforms
from server.audio import F32
from server.errors import SessionError
from server.protocol import (
    Final,
    OpenAIError,
    OpenAIErrorBody,
    SpeakerProfile,
    TextDelta,
    TextDone,
)
from server.session import Options, Session, Update, check_recording, fit_recording
from server.transport import Resources, log, observe_final


def stream_transcript(
    res: Resources,
    audio: F32,
    adapt_input: bool = False,
    profile: InputTransforms | None = None,
) -> StreamingResponse:
    """The events of `audio` (mono float32 at the model's rate; with `adapt_input`, heard
    through transforms fitted to it before the first event); the caller has checked that a
    stream slot is free."""
    check_recording(res.engine, audio)
    return StreamingResponse(
        _events(res, audio, adapt_input, profile),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


async def _events(
    res: Resources, audio: F32, adapt_input: bool, profile: InputTransforms | None
) -> AsyncIterator[str]:
    sent = ""
    try:
        with res.slots.hold():
            async for update in _updates(res, audio, adapt_input, profile):
                if isinstance(update, SpeakerProfile):
                    continue  # a file's session never fits one (no adapt_speaker)
                text = update.text if isinstance(update, Final) else update.stable
                if delta := _delta(sent, text):
                    sent += delta
                    yield _sse(TextDelta(delta=delta))
                if isinstance(update, Final):
                    yield _sse(TextDone(text=update.text))
        res.metrics.streams.labels("rest").inc()
    except SessionError as e:
        res.metrics.errors.labels(e.code).inc()
        body = OpenAIErrorBody(message=e.message, type=e.openai_type, code=e.code)
        yield _sse(OpenAIError(error=body))


async def _updates(
    res: Resources, audio: F32, adapt_input: bool, profile: InputTransforms | None
) -> AsyncIterator[Update]:
    """Partials as the file is decoded, in pieces of `max_chunk_frames`, then the final."""
    engine, rate = res.engine, res.engine.features.sample_rate
    began = time.perf_counter()
    transforms = await fit_recording(engine, audio) if adapt_input else None
    options = Options(sample_rate=rate, word_timestamps=False)
    session = Session(engine, options, transforms=transforms, profile=profile)
    piece = engine.max_chunk_frames * engine.features.hop
    try:
        await session.start()
        for lo in range(0, len(audio), piece):
            for update in await session.feed(audio[lo : lo + piece]):
                yield update
        yield await session.finish()
        observe_final(res, session, began)
    finally:
        session.close()


def _delta(sent: str, text: str) -> str:
    """What `text` adds to the text sent so far ('' when it adds nothing)."""
    if text.startswith(sent):
        return text[len(sent) :]
    log.warning("a transcript event would take back sent text %r for %r; skipped", sent, text)
    return ""


def _sse(event: BaseModel) -> str:
    return f"data: {event.model_dump_json()}\n\n"
