"""The rest of OpenAI's API that its clients touch: `GET /v1/models`, `GET /v1/models/{id}`,
`POST /v1/audio/translations` (refused: English transcription only), and OpenAI's error
shape for every failure on a `/v1/` path, unknown paths and wrong methods included, so an
OpenAI client raises NotFoundError or BadRequestError with our message instead of failing
to parse FastAPI's `{"detail": ...}`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from server.errors import MethodNotAllowed, NotFound, Unsupported
from server.protocol import OpenAIError, OpenAIErrorBody, OpenAIModel, OpenAIModelList
from server.rest import openai_error
from server.transport import authorize, resources

router = APIRouter()
SERVED = "POST /v1/audio/transcriptions, GET /v1/models, WS /v1/stream and WS /vosk"


@router.get("/v1/models")
async def models(request: Request) -> OpenAIModelList:
    """The served bundle, the one model here."""
    res = resources(request)
    authorize(request, res.config.auth_tokens)
    return OpenAIModelList(data=[served_model(res.config.bundle)])


@router.get("/v1/models/{model_id:path}")
async def model(model_id: str, request: Request) -> OpenAIModel:
    """Any name, as the served bundle: transcriptions take any model name (a client written
    for OpenAI asks for `whisper-1`), so every name resolves, to the model that hears it."""
    res = resources(request)
    authorize(request, res.config.auth_tokens)
    return served_model(res.config.bundle).model_copy(update={"id": model_id})


@router.post("/v1/audio/translations")
async def translations(request: Request) -> Response:
    authorize(request, resources(request).config.auth_tokens)
    raise Unsupported(
        "translation is not served: this server transcribes English speech only; "
        "use POST /v1/audio/transcriptions"
    )


def served_model(bundle: str) -> OpenAIModel:
    """The bundle as an OpenAI model: its directory name, and when its config was written."""
    root = Path(bundle).resolve()
    return OpenAIModel(id=root.name, created=int((root / "config.json").stat().st_mtime))


async def http_error(request: Request, error: HTTPException) -> Response:
    """Routing and HTTP errors: OpenAI's shape under /v1/, FastAPI's own elsewhere."""
    if not request.url.path.startswith("/v1/"):
        return await http_exception_handler(request, error)
    where = f"{request.method} {request.url.path}"
    if error.status_code == 404:
        return openai_error(NotFound(f"no such endpoint: {where}; this server has {SERVED}"))
    if error.status_code == 405:
        allowed = (error.headers or {}).get("Allow", "another method")
        refused = MethodNotAllowed(f"{where} is not allowed; {request.url.path} takes {allowed}")
        return openai_error(refused, headers=error.headers)
    body = OpenAIErrorBody(message=f"{where}: {error.detail}", type="invalid_request_error")
    return JSONResponse(
        OpenAIError(error=body).model_dump(), status_code=error.status_code, headers=error.headers
    )
