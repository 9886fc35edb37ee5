"""`/vosk`: the Vosk server protocol, so existing Vosk clients work unchanged.

Optional `{"config": {"sample_rate": R}}` first (16 kHz when absent), then binary PCM16
frames, each answered by one JSON message: `{"partial": ...}`, or `{"result": [...], "text":
...}` where trailing silence ends an utterance (`vosk_endpoint_ms`), as Vosk's endpointer
does; then `{"eof" : 1}`, answered by the last result. Vosk has no error message: errors
close the socket with a code and a reason.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from server.errors import BadConfig, BadMessage, SessionError
from server.protocol import (
    Final,
    ProtocolError,
    VoskPartial,
    VoskResult,
    VoskWord,
    parse_vosk_text,
)
from server.session import Options, Session
from server.transport import (
    Resources,
    audio_frame,
    authorize,
    close_with_error,
    log,
    observe_final,
    receive,
    resources,
)

router = APIRouter()
VOSK_DEFAULT_RATE = 16000


@router.websocket("/vosk")
async def vosk(ws: WebSocket) -> None:
    res = resources(ws)
    await ws.accept()
    try:
        authorize(ws, res.config.auth_tokens)
        with res.slots.hold():
            await _serve(ws, res)
        res.metrics.streams.labels("vosk").inc()
    except SessionError as e:
        await close_with_error(ws, e, res.metrics, wire=False)
    except WebSocketDisconnect:
        log.info("client left /vosk mid-stream; its resources are freed")


async def _serve(ws: WebSocket, res: Resources) -> None:
    message = await receive(ws, res.config.idle_timeout_s)
    rate = VOSK_DEFAULT_RATE
    if isinstance(message, str):
        rate_or_eof = _text(message)
        if rate_or_eof is None:
            raise BadMessage("eof before any audio")
        rate, message = rate_or_eof, b""
    options = Options(sample_rate=rate, partials=True, endpoint_ms=res.config.vosk_endpoint_ms)
    session = Session(res.engine, options)
    try:
        await session.start()
        await _stream(ws, res, session, message)
    finally:
        session.close()


async def _stream(ws: WebSocket, res: Resources, session: Session, first: bytes | str) -> None:
    message, partial = first, ""
    while True:
        if isinstance(message, bytes):
            updates = await session.feed(audio_frame(message, "pcm_s16le")) if message else []
            finals = [u for u in updates if isinstance(u, Final)]
            for final in finals:
                await ws.send_text(_result(final))
                partial = ""
            partial = next((u.text for u in updates if not isinstance(u, Final)), partial)
            if message and not finals:
                await ws.send_text(VoskPartial(partial=partial).model_dump_json())
        elif _text(message) is None:
            eof_at = time.perf_counter()
            await ws.send_text(_result(await session.finish()))
            observe_final(res, session, eof_at)
            await ws.close(1000)
            return
        else:
            raise BadMessage("the config must be the first message")
        message = await receive(ws, res.config.idle_timeout_s)


def _result(final: Final) -> str:
    words = [VoskWord(conf=w.conf, end=w.end, start=w.start, word=w.word) for w in final.words]
    return VoskResult(result=words, text=final.text).model_dump_json()


def _text(message: str) -> int | None:
    try:
        return parse_vosk_text(message)
    except ProtocolError as e:
        raise (BadConfig if e.code == "bad_config" else BadMessage)(str(e)) from None
