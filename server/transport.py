"""What the transports share: resources from app.state, auth, WebSocket receive and errors."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import WebSocket
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocketDisconnect, WebSocketState

from models.input_adaptation import InputTransforms
from server.audio import F32, AudioError, decode_pcm
from server.config import ServerConfig
from server.engine import Engine
from server.errors import (
    BadAudio,
    BadConfig,
    BadMessage,
    IdleTimeout,
    SessionError,
    Unauthorized,
)
from server.limits import StreamSlots
from server.metrics import Metrics
from server.profiles import ProfileError, decode_profile
from server.protocol import Error
from server.session import Session
from server.ws_frames import refused

log = logging.getLogger("harken.server")


@dataclass(frozen=True)
class Resources:
    """Everything a route needs, built by the lifespan."""

    config: ServerConfig
    engine: Engine
    slots: StreamSlots
    metrics: Metrics


def resources(conn: HTTPConnection) -> Resources:
    res = getattr(conn.app.state, "resources", None)
    if not isinstance(res, Resources):
        raise RuntimeError("the app has not started (its lifespan builds the model and dispatcher)")
    return res


def authorize(conn: HTTPConnection, tokens: frozenset[str]) -> None:
    """Bearer token from the Authorization header, or `?token=` for browser WebSockets."""
    if not tokens:
        return
    header = conn.headers.get("authorization", "")
    given = (
        header[7:].strip()
        if header.lower().startswith("bearer ")
        else conn.query_params.get("token", "")
    )
    if not any(hmac.compare_digest(given.encode(), t.encode()) for t in tokens):
        raise Unauthorized("missing or unknown bearer token; send 'Authorization: Bearer <token>'")


async def receive(ws: WebSocket, idle_timeout: float) -> bytes | str:
    """The next data frame; raises IdleTimeout, the error of a refused frame, or
    WebSocketDisconnect if the client left."""
    try:
        message = await asyncio.wait_for(ws.receive(), idle_timeout)
    except TimeoutError:
        raise IdleTimeout(f"no message for {idle_timeout:.0f} s; the stream was closed") from None
    if message["type"] == "websocket.disconnect":
        code = message.get("code", 1000)
        if refusal := refused(code, message.get("reason") or ""):
            raise refusal  # a frame the WebSocket layer refused (server/ws_frames.py)
        raise WebSocketDisconnect(code)
    data = message.get("bytes")
    if data is not None:
        return bytes(data)
    text = message.get("text")
    if text is None:
        raise BadMessage("empty WebSocket message")
    return str(text)


async def close_with_error(
    ws: WebSocket,
    error: SessionError,
    metrics: Metrics,
    wire: bool = True,
    render: Callable[[SessionError], str] | None = None,
) -> None:
    """Tell the client what went wrong (unless the protocol has no error message: `wire`;
    `render`: the protocol's own error message, as JSON text) and close."""
    metrics.errors.labels(error.code).inc()
    if ws.client_state is not WebSocketState.CONNECTED:
        return
    try:
        if wire and render is not None:
            await ws.send_text(render(error))
        elif wire:
            await ws.send_json(Error(code=error.code, message=error.message).model_dump())
        await ws.close(error.ws_close, reason=_reason(error.message))
    except (WebSocketDisconnect, RuntimeError, OSError):
        log.debug("client left before its error could be sent", exc_info=True)


def _reason(message: str) -> str:
    """A close reason fits in 123 bytes (RFC 6455 §5.5)."""
    encoded = message.encode()[:123]
    return encoded.decode(errors="ignore")


def audio_frame(data: bytes, encoding: str) -> F32:
    try:
        return decode_pcm(data, encoding)
    except AudioError as e:
        raise BadAudio(str(e)) from None


def client_profile(engine: Engine, token: str | None) -> InputTransforms | None:
    """A client's speaker profile token (server/profiles.py), decoded for this server's
    network; BadConfig with the reason when it cannot apply."""
    if token is None:
        return None
    if engine.fit_profile is None:
        raise BadConfig("speaker_profile: this server cannot adapt to speakers")
    try:
        return decode_profile(token, engine.network, engine.candidates, engine.features.n_bins)
    except ProfileError as e:
        raise BadConfig(f"speaker_profile: {e}") from None


def observe_profiles(res: Resources, session: Session) -> None:
    """How long the stream's speaker profiles took to be heard: the first fit and the refits
    apart, since refits wait for other fits to finish (experiments/speaker.md)."""
    for i, wait in enumerate(session.profile_waits):
        res.metrics.profile_wait_seconds.labels(fit="refit" if i else "first").observe(wait)


def observe_final(res: Resources, session: Session, eos_at: float) -> None:
    """End-of-utterance latency (eos received to final sent) and real-time factor."""
    res.metrics.eou_latency_seconds.observe(time.perf_counter() - eos_at)
    if session.duration > 0:
        res.metrics.real_time_factor.observe(session.timing.busy / session.duration)
