"""Typed errors of a stream or request, each knowing how every transport reports it.

`code` goes into `{"type": "error", "code": ...}` and OpenAI's `error.code`; `ws_close` is
the WebSocket close code (RFC 6455 §7.4.1); `http_status` the REST status.
"""

from __future__ import annotations

from typing import ClassVar


class SessionError(Exception):
    code: ClassVar[str] = "internal_error"
    ws_close: ClassVar[int] = 1011  # internal error
    http_status: ClassVar[int] = 500
    openai_type: ClassVar[str] = "server_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ClientError(SessionError):
    code = "bad_request"
    ws_close = 1008  # policy violation
    http_status = 400
    openai_type = "invalid_request_error"


class BadConfig(ClientError):
    code = "bad_config"


class OutOfOrder(ClientError):
    code = "out_of_order"


class BadMessage(ClientError):
    code = "bad_message"


class BadAudio(ClientError):
    code = "bad_audio"
    ws_close = 1003  # unsupported data


class EmptyAudio(ClientError):
    code = "empty_audio"


class UnsupportedFormat(ClientError):
    code = "unsupported_format"
    ws_close = 1003
    http_status = 415


class StreamTooLong(ClientError):
    code = "too_long"
    ws_close = 1009  # message too big
    http_status = 413


class UploadTooLarge(ClientError):
    code = "upload_too_large"
    ws_close = 1009
    http_status = 413


class FrameTooLarge(ClientError):
    code = "frame_too_large"
    ws_close = 1009  # message too big


class NotUtf8(ClientError):
    code = "invalid_utf8"
    ws_close = 1007  # invalid frame payload data


class Unsupported(ClientError):
    code = "unsupported"


class NotFound(ClientError):
    code = "not_found"
    http_status = 404


class MethodNotAllowed(ClientError):
    code = "method_not_allowed"
    http_status = 405


class IdleTimeout(ClientError):
    code = "idle_timeout"
    ws_close = 1001  # going away


class SlowReader(ClientError):
    code = "slow_reader"  # the client stopped reading its results


class Unauthorized(ClientError):
    code = "unauthorized"
    http_status = 401


class Overloaded(SessionError):
    code = "overloaded"
    ws_close = 1013  # try again later
    http_status = 503


class ShuttingDown(SessionError):
    code = "shutting_down"
    ws_close = 1012  # service restart
    http_status = 503


class ModelFailed(SessionError):
    code = "model_error"


class DecoderFailed(SessionError):
    code = "decoder_error"
