"""Frames the WebSocket layer refuses, said clearly: uvicorn's sans-I/O WebSocket protocol
with one change.

A message over `MAX_FRAME_BYTES` (the server never buffers more) or a text message that
is not UTF-8 ends the connection there, below the app, with close 1009 or 1007 (RFC 6455
§7.4.1). Uvicorn closed those with websockets' terse reason or none, and logged invalid
UTF-8 as an ERROR with a traceback. Here the close carries a reason that says what to
change, a route whose protocol has an error message (`explain_refusals`, /v1/stream) gets
`{"type": "error", "code", "message"}` just before the close, the log gets one INFO line,
and the app sees the refusal as the typed error `refused(code)` gives, not as a client that
left. Other connections never notice.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import HTTPConnection
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State
from websockets.server import ServerProtocol

from server.errors import ClientError, FrameTooLarge, NotUtf8
from server.protocol import Error

MAX_FRAME_BYTES = 4 * 1024 * 1024  # largest WebSocket message taken: 2 min of 16 kHz PCM16
_EXPLAIN = "harken.explain_refusals"  # a key of the connection's scope["state"]
log = logging.getLogger("harken.server")


def explain_refusals(conn: HTTPConnection) -> None:
    """Mark a WebSocket whose protocol has an error message: a frame this layer refuses is
    then explained with one before the close. Call before `accept`."""
    conn.scope.setdefault("state", {})[_EXPLAIN] = True


def refused(code: int, reason: str) -> ClientError | None:
    """The error behind a close this layer sent with `code` (1007, 1009), else None."""
    kind = {FrameTooLarge.ws_close: FrameTooLarge, NotUtf8.ws_close: NotUtf8}.get(code)
    return kind(reason or "the server refused a frame") if kind else None


def _refusal(code: int, limit: int | None) -> ClientError | None:
    if code == FrameTooLarge.ws_close:
        return FrameTooLarge(
            f"a WebSocket message over {limit} bytes ({(limit or 0) / 2**20:g} MiB) was refused; "
            "send audio in smaller frames (100 ms at 16 kHz is 3200 bytes)"
        )
    if code == NotUtf8.ws_close:
        return NotUtf8("text messages must be UTF-8 JSON; send audio as binary frames")
    return None


class _Connection(ServerProtocol):
    """websockets' server side, explaining the failures it closes the connection for."""

    explain = False  # send an error message first (set per connection)
    where = ""  # the path, for the log
    refused: ClientError | None = None  # what the connection failed for

    def fail(self, code: int, reason: str = "") -> None:
        error = _refusal(code, self.max_message_size) if self.state is State.OPEN else None
        if error is not None:
            self.refused = error
            log.info("refused a WebSocket frame on %s: %s", self.where, error.message)
            if self.explain:
                self.send_text(
                    Error(code=error.code, message=error.message).model_dump_json().encode()
                )
            reason = error.message.encode()[:123].decode(errors="ignore")  # RFC 6455 §5.5
        super().fail(code, reason)


class RefusingWebSocketProtocol(WebSocketsSansIOProtocol):
    """Uvicorn's `websockets-sansio` protocol with `_Connection` and a UTF-8 check that
    fails the connection quietly (`make_server` passes this class as `ws`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = _Connection(
            extensions=self.conn.available_extensions,
            max_size=self.config.ws_max_size,
            logger=self.conn.logger,
        )
        self.conn = self.guard

    def handle_connect(self, event: Any) -> None:
        self.guard.where = str(event.path).partition("?")[0]
        super().handle_connect(event)

    async def send(self, message: Any) -> None:
        if message["type"] == "websocket.accept":  # the route has had its say by now
            self.guard.explain = bool(self.scope.get("state", {}).get(_EXPLAIN))
        elif self.guard.refused is not None:
            return  # the connection is gone; the app learns why at its next receive
        await super().send(message)

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text" and not self.close_sent and not _utf8(self.frames):
            self.frames = []
            self.conn.fail(NotUtf8.ws_close)
            self.handle_parser_exception()
            return
        super().send_receive_event_to_app()


def _utf8(frames: list[bytes]) -> bool:
    try:
        b"".join(frames).decode()
    except UnicodeDecodeError:
        return False
    return True
