"""`/v1/stream`: config message, binary audio frames, `{"type": "eos"}`; partials, then a final.

client                               server
{"type": "config", ...}   ->         <- {"type": "warning", "code", "message"}*
  ("punctuate": true: written text)
                                        (a hotword with nothing to spell: left out)
<binary audio>*           ->         <- {"type": "partial", "text", "stable"}*
                                     <- {"type": "speaker_profile", "profile", "seconds"}*
                                        (asked for with "adapt_speaker": true)
{"type": "eos"}           ->         <- {"type": "final", "text", "words", "alternatives"}
                                     <- close 1000
any rule broken                      <- {"type": "error", "code", "message"}, close 1003..1013
"""

from __future__ import annotations

import time

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from server.errors import BadConfig, BadMessage, OutOfOrder, SessionError
from server.hotwords import Hotwords, normalise_hotwords
from server.protocol import (
    ProtocolError,
    StreamConfig,
    StreamWarning,
    parse_control,
    parse_stream_config,
)
from server.session import Options, Session
from server.transport import (
    Resources,
    audio_frame,
    authorize,
    client_profile,
    close_with_error,
    log,
    observe_final,
    observe_profiles,
    receive,
    resources,
)
from server.ws_frames import bound_sends, explain_refusals

router = APIRouter()


@router.websocket("/v1/stream")
async def stream(ws: WebSocket) -> None:
    res = resources(ws)
    explain_refusals(ws)
    bound_sends(ws, res.config.send_timeout_s)
    await ws.accept()
    try:
        authorize(ws, res.config.auth_tokens)
        with res.slots.hold():
            await _serve(ws, res)
        res.metrics.streams.labels("stream").inc()
    except SessionError as e:
        await close_with_error(ws, e, res.metrics)
    except WebSocketDisconnect:
        log.info("client left /v1/stream mid-stream; its resources are freed")


async def _serve(ws: WebSocket, res: Resources) -> None:
    config = await _first_config(ws, res)
    hotwords = normalise_hotwords(config.hotwords)
    session = Session(
        res.engine,
        _options(config, hotwords, res.config.adapt_speakers),
        profile=client_profile(res.engine, config.speaker_profile),
    )
    try:
        await session.start()
        for entry in hotwords.refused:
            warning = StreamWarning(
                code="hotword_refused", message=hotwords.refusal(entry, "hotwords")
            )
            await ws.send_json(warning.model_dump())
        while True:
            message = await receive(ws, res.config.idle_timeout_s)
            if isinstance(message, bytes):
                for update in await session.feed(audio_frame(message, config.encoding)):
                    await ws.send_json(update.model_dump(exclude_none=True))
                continue
            _eos(message)
            eos_at = time.perf_counter()
            final = await session.finish()
            await ws.send_json(final.model_dump(exclude_none=True))
            observe_final(res, session, eos_at)
            await ws.close(1000)
            return
    finally:
        observe_profiles(res, session)
        session.close()


async def _first_config(ws: WebSocket, res: Resources) -> StreamConfig:
    message = await receive(ws, res.config.idle_timeout_s)
    if isinstance(message, bytes):
        raise OutOfOrder(
            'audio before the config; send {"type": "config", "sample_rate": ...} first'
        )
    try:
        return parse_stream_config(message)
    except ProtocolError as e:
        raise _protocol_error(e) from None


def _eos(text: str) -> None:
    try:
        parse_control(text)
    except ProtocolError as e:
        raise _protocol_error(e) from None


def _protocol_error(e: ProtocolError) -> SessionError:
    kinds: dict[str, type[SessionError]] = {"out_of_order": OutOfOrder, "bad_config": BadConfig}
    return kinds.get(e.code, BadMessage)(str(e))


def _options(config: StreamConfig, hotwords: Hotwords, adapt_speakers: bool) -> Options:
    """The session's options: the client's (its hotwords normalised), the server's defaults
    where it left them out."""
    adapt = adapt_speakers if config.adapt_speaker is None else config.adapt_speaker
    return Options(
        sample_rate=config.sample_rate,
        partials=config.partials,
        n_best=config.n_best,
        word_timestamps=config.word_timestamps,
        hotwords=hotwords.phrases,
        casing=hotwords.casing,
        written=config.punctuate,
        endpoint_ms=config.endpoint_ms,
        adapt_speaker=adapt,
        # only to a client that asked: a client that did not may not know the message
        send_profile=config.adapt_speaker is True,
    )
