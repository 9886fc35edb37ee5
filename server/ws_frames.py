"""Frames the WebSocket layer refuses, said clearly: uvicorn's sans-I/O WebSocket protocol
with one change.

A message over `MAX_FRAME_BYTES` (the server never buffers more) or a text message that
is not UTF-8 ends the connection there, below the app, with close 1009 or 1007 (RFC 6455
§7.4.1). Uvicorn closed those with websockets' terse reason or none, and logged invalid
UTF-8 as an ERROR with a traceback. Here the close carries a reason that says what to
change, a route whose protocol has an error message (`explain_refusals`) gets it just before
the close (/v1/stream's `{"type": "error", "code", "message"}`, or the route's own shape:
OpenAI's on /v1/realtime), the log gets one INFO line,
and the app sees the refusal as the typed error `refused(code)` gives, not as a client that
left. Other connections never notice.

A client that stops reading is the other failure this layer ends. Uvicorn buffers up to
64 KiB a connection beyond the kernel's socket buffers, and then holds the app's next send
until the client reads; a client that never does held its stream (and the server's
shutdown) forever. With `bound_sends`, a send waits at most that long: then the connection
is closed as above with `SlowReader` (1008; the error message and close come after what is
unread, so a client that wakes up still learns why) and aborted if the client still reads
nothing, and the send raises `SlowReader` so that the route frees the stream at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from starlette.requests import HTTPConnection
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State
from websockets.server import ServerProtocol

from server.errors import ClientError, FrameTooLarge, NotUtf8, SlowReader
from server.protocol import Error

MAX_FRAME_BYTES = 4 * 1024 * 1024  # largest WebSocket message taken: 2 min of 16 kHz PCM16
_EXPLAIN = "harken.explain_refusals"  # keys of the connection's scope["state"]
_SEND_TIMEOUT = "harken.send_timeout_s"
log = logging.getLogger("harken.server")


# a route's error message for an error, as the JSON text it sends
Render = Callable[[ClientError], str]


def explain_refusals(conn: HTTPConnection, render: Render | None = None) -> None:
    """Mark a WebSocket whose protocol has an error message: a frame this layer refuses is
    then explained with one (`render`'s; by default /v1/stream's) before the close. Call
    before `accept`."""
    conn.scope.setdefault("state", {})[_EXPLAIN] = render or _stream_error


def _stream_error(error: ClientError) -> str:
    return Error(code=error.code, message=error.message).model_dump_json()


def bound_sends(conn: HTTPConnection, timeout_s: float) -> None:
    """Give up on the client once a send has waited `timeout_s` for it to read what the
    server buffers for it (module docstring). Call before `accept`."""
    conn.scope.setdefault("state", {})[_SEND_TIMEOUT] = timeout_s


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

    explain: Render | None = None  # the error message sent first, if any (per connection)
    where = ""  # the path, for the log
    refused: ClientError | None = None  # what the connection failed for

    def fail(self, code: int, reason: str = "") -> None:
        error = _refusal(code, self.max_message_size) if self.state is State.OPEN else None
        if error is None:
            super().fail(code, reason)
        else:
            self.give_up(error, "refused a WebSocket frame")

    def give_up(self, error: ClientError, what: str) -> None:
        """End the connection for `error`: one log line, the error message first where the
        route has one, then a close with its code and the message as its reason."""
        self.refused = error
        log.info("%s on %s: %s", what, self.where, error.message)
        if self.state is not State.OPEN:
            return
        if self.explain is not None:
            self.send_text(self.explain(error).encode())
        reason = error.message.encode()[:123].decode(errors="ignore")  # RFC 6455 §5.5
        super().fail(error.ws_close, reason)


class RefusingWebSocketProtocol(WebSocketsSansIOProtocol):
    """Uvicorn's `websockets-sansio` protocol with `_Connection`, a UTF-8 check that
    fails the connection quietly, and sends bounded in time (`bound_sends`); `make_server`
    passes this class as `ws`."""

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

    send_timeout_s: float | None = None  # see bound_sends; None: wait for the client forever

    async def send(self, message: Any) -> None:
        if message["type"] == "websocket.accept":  # the route has had its say by now
            state = self.scope.get("state", {})
            self.guard.explain = state.get(_EXPLAIN)
            self.send_timeout_s = state.get(_SEND_TIMEOUT)
        elif self.guard.refused is not None:
            return  # gone; the app learns why at its next receive (or from the send below)
        elif not self.writable.is_set():  # over 64 KiB are waiting for the client to read
            await self._wait_for_reader()
        await super().send(message)

    async def _wait_for_reader(self) -> None:
        try:
            await asyncio.wait_for(self.writable.wait(), self.send_timeout_s)
            return
        except TimeoutError:
            pass
        waiting = self.transport.get_write_buffer_size()
        error = SlowReader(
            f"results went unread for {self.send_timeout_s:g} s; read the server's messages "
            "as they come"
        )
        self.guard.give_up(error, f"dropped a client that stopped reading ({waiting} bytes)")
        self.transport.write(b"".join(self.conn.data_to_send()))  # behind what is unread
        self.close_sent = True
        self.transport.close()  # once the client has read it all
        self._abort_unless_read(waiting)
        raise error

    def shutdown(self) -> None:
        """Uvicorn's shutdown closes the connection once the client has read what is
        buffered for it; a client that does not read is aborted instead."""
        super().shutdown()
        if self.send_timeout_s is not None and (waiting := self.transport.get_write_buffer_size()):
            self._abort_unless_read(waiting)

    def _abort_unless_read(self, waiting: int) -> None:
        """Abort the closing connection (a TCP reset) if the client reads none of the
        `waiting` bytes left for it in `send_timeout_s`; while it reads, check again."""

        def check() -> None:
            if self.disconnected:
                return
            left = self.transport.get_write_buffer_size()
            if left >= waiting:
                self.transport.abort()
            else:
                self._abort_unless_read(left)

        self.loop.call_later(self.send_timeout_s or 0.0, check)

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
