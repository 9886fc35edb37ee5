"""`create_app(config)`: the FastAPI app. The lifespan builds the model runner, the Batch
Dispatch loop and the decoder workers into `app.state`; nothing heavy happens at import.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from server import openai_api, page, rest, ws_realtime, ws_stream, ws_vosk
from server.config import ServerConfig
from server.engine import running_engine
from server.errors import BadConfig, SessionError
from server.limits import StreamSlots
from server.memory import trim_every
from server.metrics import Metrics
from server.transport import Resources, log, resources

TRANSCRIPTIONS = "/v1/audio/transcriptions"


def create_app(config: ServerConfig) -> FastAPI:
    app = FastAPI(title="harken", summary="streaming speech recognition", lifespan=_lifespan)
    app.state.config = config
    app.include_router(ws_stream.router)
    app.include_router(ws_vosk.router)
    app.include_router(ws_realtime.router)
    app.include_router(rest.router)
    app.include_router(openai_api.router)
    app.include_router(page.build_router())
    _add_probes(app)
    _add_error_handlers(app)
    app.middleware("http")(_upload_limit)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    config: ServerConfig = app.state.config
    metrics = Metrics(config.max_batch)
    async with running_engine(config, metrics) as engine:
        slots = StreamSlots(config.max_streams)
        metrics.track_active(
            lambda: slots.in_use, engine.model_states, engine.step_shapes, lambda: engine.narrowed
        )
        app.state.resources = Resources(config, engine, slots, metrics)
        log.info(
            "harken ready: %s on %s/%s, %s dispatch, %s decoder%s",
            config.bundle,
            config.device,
            config.dtype,
            config.policy,
            config.decoder,
            f" (the bundle's search with {config.search})"
            if config.search and config.decoder == "beam"
            else "",
        )
        trimmer = (
            asyncio.get_running_loop().create_task(trim_every(config.malloc_trim_s))
            if config.malloc_trim_s > 0
            else None
        )
        try:
            yield
        finally:
            await slots.drain(config.shutdown_grace_s)
            if trimmer is not None:
                trimmer.cancel()


def _add_probes(app: FastAPI) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up and serving HTTP."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        """Bundle loaded, dispatcher alive, and not draining for shutdown."""
        res = getattr(request.app.state, "resources", None)
        ready = (
            isinstance(res, Resources) and res.engine.dispatcher.alive and not res.slots.draining
        )
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        return Response(resources(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _add_error_handlers(app: FastAPI) -> None:
    app.exception_handler(StarletteHTTPException)(openai_api.http_error)

    @app.exception_handler(SessionError)
    async def session_error(request: Request, error: SessionError) -> Response:
        if isinstance(getattr(request.app.state, "resources", None), Resources):
            resources(request).metrics.errors.labels(error.code).inc()
        return rest.openai_error(error)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        param = str(first["loc"][-1]) if first["loc"] else None
        message = f"{param}: {first['msg']}" if param else str(first["msg"])
        return rest.openai_error(BadConfig(message), param=param)


async def _upload_limit(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """413 from Content-Length alone, before the multipart body is read."""
    if request.url.path == TRANSCRIPTIONS:
        try:
            rest.check_upload_size(request, request.app.state.config.max_upload_bytes)
        except SessionError as e:
            return rest.openai_error(e)
    return await call_next(request)
