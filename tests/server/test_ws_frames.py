"""Frames the WebSocket layer refuses (over 4 MiB, text that is not UTF-8): a clear error,
the right close code, one quiet log line, and nothing felt by other streams."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from server.ws_frames import MAX_FRAME_BYTES
from tests.server.serving import AUDIO_PCM, Running, eventually, receive_all

CONFIG = json.dumps({"type": "config", "sample_rate": 16000})
TOO_BIG = b"\x00" * (MAX_FRAME_BYTES + 2)
NOT_UTF8 = b'{"type": "eos"\xff}'


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logs() -> Iterator[list[logging.LogRecord]]:
    """What the server logs (uvicorn's loggers do not propagate to the root's)."""
    handler, loggers = Records(), [logging.getLogger(n) for n in ("harken", "uvicorn", "asyncio")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield handler.records
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def refuse(ws: ClientConnection, path: str, frame: bytes, text: bool) -> list[Any]:
    """Start a stream, send a little audio and then `frame`: what came back before close."""
    with suppress(ConnectionClosed):
        if path == "/v1/stream":
            ws.send(CONFIG)
        ws.send(AUDIO_PCM[:3200])  # the server may be busy with this as the bad frame comes
        ws.send(frame, text=text)
    return receive_all(ws)


@pytest.mark.parametrize(
    ("frame", "text", "code", "close", "words"),
    [
        (TOO_BIG, False, "frame_too_large", 1009, "smaller frames"),
        (NOT_UTF8, True, "invalid_utf8", 1007, "UTF-8"),
    ],
)
def test_a_refused_frame_is_explained_and_logged_once_without_a_traceback(
    server: Running,
    expected: str,
    logs: list[logging.LogRecord],
    frame: bytes,
    text: bool,
    code: str,
    close: int,
    words: str,
) -> None:
    with connect(f"{server.ws}/v1/stream") as steady:
        steady.send(CONFIG)
        steady.send(AUDIO_PCM[:16000])
        with connect(f"{server.ws}/v1/stream", max_size=None) as bad:
            *_, error = refuse(bad, "/v1/stream", frame, text)
        assert error == {"type": "error", "code": code, "message": error["message"]}
        assert words in error["message"]
        assert bad.close_code == close and words in str(bad.close_reason)
        steady.send(AUDIO_PCM[16000:])
        steady.send(json.dumps({"type": "eos"}))
        assert receive_all(steady)[-1]["text"] == expected  # the other stream never noticed
    res = server.resources
    eventually(lambda: res.slots.in_use == 0 and res.engine.dispatcher.active_streams == 0)
    ours = [r for r in logs if r.name.startswith("harken")]
    assert [r.levelname for r in ours] == ["INFO"] and words in ours[0].getMessage()
    assert not [r for r in logs if r.levelno >= logging.WARNING or r.exc_info]
    assert f'harken_errors_total{{kind="{code}"}}' in httpx.get(f"{server.url}/metrics").text


@pytest.mark.parametrize(
    ("frame", "text", "close"), [(TOO_BIG, False, 1009), (NOT_UTF8, True, 1007)]
)
def test_vosk_closes_a_refused_frame_with_a_reason_only(
    server: Running, frame: bytes, text: bool, close: int
) -> None:
    with connect(f"{server.ws}/vosk", max_size=None) as ws:
        replies = refuse(ws, "/vosk", frame, text)
    assert all("partial" in r for r in replies)  # and no error message
    assert ws.close_code == close and ws.close_reason
