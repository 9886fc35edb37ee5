"""`stream=true` on `POST /v1/audio/transcriptions`: OpenAI's server-sent events.

    data: {"type": "transcript.text.delta", "delta": "the weather"}
    data: {"type": "transcript.text.delta", "delta": " is nice today"}
    data: {"type": "transcript.text.done", "text": "the weather is nice today"}

The file runs through a session in steps as a live stream does, decoded a block at a time
(server/recording.py), and each delta is what the partials' `stable` words add (the decoder
never takes those back), then what the final adds to them: the deltas add up to the final
text. Written text (the default) keeps this: its stable prefix only grows (server/written.py). Errors found before the first event (format, size, capacity, a file that does not
decode at all) are ordinary HTTP errors; one after it (a file longer than `--max-file-s`, a
later block that is not audio) is an event in OpenAI's error shape, which OpenAI's client
raises as an APIError.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator

from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from models.input_adaptation import InputTransforms
from server.audio import F32
from server.errors import SessionError
from server.hotwords import NO_HOTWORDS, Hotwords
from server.protocol import (
    Final,
    OpenAIError,
    OpenAIErrorBody,
    SpeakerProfile,
    TextDelta,
    TextDone,
)
from server.recording import hear
from server.session import Options, Session, Update
from server.transport import Resources, log, observe_final


def stream_transcript(
    res: Resources,
    blocks: AsyncGenerator[F32, None],
    adapt_input: bool = False,
    profile: InputTransforms | None = None,
    hotwords: Hotwords = NO_HOTWORDS,
    written: bool = True,
) -> StreamingResponse:
    """The events of a file's `blocks` (mono float32 at the model's rate, closed at the end;
    with `adapt_input`, heard through transforms fitted to it before the first event; with
    `written`, as written text); the caller has checked that a stream slot is free."""
    return StreamingResponse(
        _events(res, blocks, adapt_input, profile, hotwords, written),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


async def _events(
    res: Resources,
    blocks: AsyncGenerator[F32, None],
    adapt_input: bool,
    profile: InputTransforms | None,
    hotwords: Hotwords,
    written: bool,
) -> AsyncIterator[str]:
    sent = ""
    try:
        with res.slots.hold():
            async for update in _updates(res, blocks, adapt_input, profile, hotwords, written):
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
    finally:
        await blocks.aclose()


async def _updates(
    res: Resources,
    blocks: AsyncGenerator[F32, None],
    adapt_input: bool,
    profile: InputTransforms | None,
    hotwords: Hotwords,
    written: bool,
) -> AsyncIterator[Update]:
    """Partials as the file is decoded, in pieces of `max_chunk_frames`, then the final."""
    began = time.perf_counter()
    options = Options(
        sample_rate=res.engine.features.sample_rate,
        word_timestamps=False,
        hotwords=hotwords.phrases,
        casing=hotwords.casing,
        written=written,
        file=True,
    )
    session = Session(res.engine, options, profile=profile)
    async for update in hear(session, blocks, adapt_input):
        yield update
    observe_final(res, session, began)


def _delta(sent: str, text: str) -> str:
    """What `text` adds to the text sent so far ('' when it adds nothing)."""
    if text.startswith(sent):
        return text[len(sent) :]
    log.warning("a transcript event would take back sent text %r for %r; skipped", sent, text)
    return ""


def _sse(event: BaseModel) -> str:
    return f"data: {event.model_dump_json()}\n\n"
