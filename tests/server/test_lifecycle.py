"""Failure isolation and graceful shutdown of a real server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from server.config import ServerConfig
from server.dispatch import Runner, Work
from server.runner import F32, Chunk
from tests.server.serving import AUDIO_PCM, Running, eventually, receive_all, running

CONFIG = json.dumps({"type": "config", "sample_rate": 16000})
EOS = json.dumps({"type": "eos"})


class FailOnce:
    """The real runner, except that its next batch raises (a device error, say)."""

    def __init__(self, runner: Runner[Chunk, F32]) -> None:
        self.runner, self.armed = runner, True

    async def run(self, batch: Sequence[Work[Chunk]]) -> Sequence[F32]:
        if self.armed:
            self.armed = False
            raise RuntimeError("device lost")
        return await self.runner.run(batch)

    def release(self, stream: int) -> None:
        self.runner.release(stream)


def test_a_failed_batch_fails_its_streams_and_the_server_keeps_serving(
    server: Running, expected: str
) -> None:
    dispatcher = server.resources.engine.dispatcher
    real = dispatcher.runner
    dispatcher.runner = FailOnce(real)
    try:
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(CONFIG)
            ws.send(AUDIO_PCM)
            [error] = receive_all(ws)
            assert (error["type"], error["code"], ws.close_code) == ("error", "model_error", 1011)
            assert "device lost" in error["message"]
    finally:
        dispatcher.runner = real
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(CONFIG)
        ws.send(AUDIO_PCM)
        ws.send(EOS)
        assert receive_all(ws)[-1]["text"] == expected
    assert 'harken_errors_total{kind="model_error"}' in httpx.get(f"{server.url}/metrics").text


def test_shutdown_lets_a_stream_in_flight_finish_and_refuses_new_ones(
    tiny_bundle: Path, expected: str
) -> None:
    with running(ServerConfig(dtype="fp32", bundle=str(tiny_bundle), shutdown_grace_s=30)) as r:
        with connect(f"{r.ws}/v1/stream") as ws:
            ws.send(CONFIG)
            ws.send(AUDIO_PCM[:16000])
            eventually(lambda: r.resources.slots.in_use == 1)
            r.server.should_exit = True  # what SIGTERM does
            eventually(lambda: r.resources.slots.draining)
            with pytest.raises(OSError):
                connect(f"{r.ws}/v1/stream", open_timeout=2)
            ws.send(AUDIO_PCM[16000:])
            ws.send(EOS)
            assert receive_all(ws)[-1]["text"] == expected
        r.thread.join(30)
        assert not r.thread.is_alive(), "the server did not exit once its last stream ended"
