"""`GET /`: a small page that streams the microphone to `/v1/stream` (server/static/).

The files are read once, when the router is built, and served from memory: three small
static files do not need a static-files mount or a cache layer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

STATIC = Path(__file__).parent / "static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def build_router() -> APIRouter:
    router = APIRouter()
    files = {p.name: p.read_bytes() for p in STATIC.iterdir() if p.suffix in _TYPES}

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> Response:
        return Response(files["index.html"], media_type=_TYPES[".html"])

    for name in files:
        if name.endswith(".js"):
            router.add_api_route(
                f"/static/{name}", _serve(files[name]), methods=["GET"], include_in_schema=False
            )
    return router


def _serve(body: bytes) -> Callable[[], Awaitable[Response]]:
    async def serve() -> Response:
        return Response(body, media_type=_TYPES[".js"], headers={"Cache-Control": "no-cache"})

    return serve
