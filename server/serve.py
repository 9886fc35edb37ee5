"""Running the app under uvicorn, with a shutdown that lets streams in flight finish.

Uvicorn's own shutdown closes every WebSocket at once (code 1012). `DrainingServer` first
stops accepting connections and refuses new streams, waits up to `shutdown_grace_s` for the
open ones to end, and only then lets uvicorn close what is left.
"""

from __future__ import annotations

import copy
import socket
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from server.transport import Resources
from server.ws_frames import MAX_FRAME_BYTES, RefusingWebSocketProtocol


class DrainingServer(uvicorn.Server):
    def __init__(self, app: FastAPI, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        res = getattr(self.app.state, "resources", None)
        if isinstance(res, Resources):
            await res.slots.drain(res.config.shutdown_grace_s)
        await super().shutdown(sockets)


def log_config(level: str = "info") -> dict[str, Any]:
    """Uvicorn's logging plus our own `harken` loggers through its handler, so start-up facts
    (the model precision `--dtype auto` chose, decoder processes) reach the server's log;
    left alone, Python drops their INFO lines."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["harken"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


def make_server(app: FastAPI, host: str, port: int, log_level: str = "info") -> DrainingServer:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config(log_level),
        ws=RefusingWebSocketProtocol,
        ws_max_size=MAX_FRAME_BYTES,
        lifespan="on",
    )
    return DrainingServer(app, config)
