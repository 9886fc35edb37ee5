"""`POST /v1/audio/transcriptions`, compatible with OpenAI's API (and its Python client).

A file goes through the same Session and Batch Dispatch as a live stream, only in larger
steps, decoded a block at a time (server/recording.py), so an hour-long file is never held
whole; with `stream=true` its transcript comes as server-sent events
(server/rest_stream.py). `model` may name anything, as OpenAI's clients insist on one:
`GET /v1/models` lists the served bundle's name. `prompt`'s phrases (separated by commas)
become hotwords, normalised as transcripts are (server/hotwords.py). Errors use OpenAI's
shape, `{"error": {"message", "type", "param", "code"}}`. Beyond OpenAI's fields,
`adapt_input` (default: the server's `--adapt-files`) hears
the file through input transforms fitted to it first (`models/input_adaptation.py`), and
`speaker_profile` (a token from a `/v1/stream` that adapted to the speaker: server/profiles.py)
hears it through that speaker's profile instead. Transcripts are written text, punctuated
and capitalised as OpenAI's are, where the bundle has a punctuator (server/written.py);
`punctuate=false` asks for the recognised words as they are.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Mapping
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from models.input_adaptation import InputTransforms
from server.audio import F32
from server.errors import BadConfig, EmptyAudio, SessionError, UploadTooLarge
from server.hotwords import Hotwords, prompt_hotwords
from server.protocol import RESPONSE_FORMATS, Final, OpenAIError, OpenAIErrorBody
from server.recording import file_blocks, opened, transcribe
from server.rest_stream import stream_transcript
from server.subtitles import segments, srt, verbose, vtt
from server.transport import Resources, authorize, client_profile, observe_final, resources

router = APIRouter()
_MULTIPART_OVERHEAD = 64 * 1024  # form fields and boundaries around the file
_RAISE_UPLOAD = " (the server's --max-upload-mb, or HARKEN_MAX_UPLOAD_MB, raises it)"


@router.post("/v1/audio/transcriptions", response_model=None)
async def transcriptions(
    request: Request,
    file: UploadFile,
    model: Annotated[str, Form()],
    response_format: Annotated[str, Form()] = "json",
    timestamp_granularities: Annotated[
        list[str] | None, Form(alias="timestamp_granularities[]")
    ] = None,
    language: Annotated[str | None, Form()] = None,
    prompt: Annotated[str | None, Form(max_length=4096)] = None,
    temperature: Annotated[float | None, Form()] = None,
    stream: Annotated[bool, Form()] = False,
    adapt_input: Annotated[bool | None, Form()] = None,
    speaker_profile: Annotated[str | None, Form(min_length=1, max_length=16384)] = None,
    punctuate: Annotated[bool, Form()] = True,
) -> Response:
    res = resources(request)
    authorize(request, res.config.auth_tokens)
    granularities = set(timestamp_granularities or ["segment"])
    _validate(response_format, granularities, language, stream)
    try:
        hotwords = prompt_hotwords(prompt or "")
    except ValueError as e:
        res.metrics.errors.labels(BadConfig.code).inc()
        return openai_error(BadConfig(str(e)), param="prompt")
    try:
        profile = client_profile(res.engine, speaker_profile)
        if profile is not None and adapt_input:
            raise BadConfig(
                "speaker_profile and adapt_input=true are two ways to hear a file; send one"
            )
    except BadConfig as e:
        res.metrics.errors.labels(e.code).inc()
        return openai_error(e, param="speaker_profile")
    # a request's profile wins over the server's default of adapting every file
    adapt = (
        False
        if profile is not None
        else (res.config.adapt_files if adapt_input is None else adapt_input)
    )
    data = await _read_upload(file, res.config.max_upload_bytes)
    if not data:
        raise EmptyAudio("the uploaded file is empty")
    if stream:
        res.slots.check()
        blocks = await opened(file_blocks(data, res.engine))
        return stream_transcript(res, blocks, adapt, profile, hotwords, punctuate)
    with res.slots.hold():
        async with aclosing(file_blocks(data, res.engine)) as blocks:
            final = await _transcribe(res, blocks, adapt, profile, hotwords, punctuate)
    res.metrics.streams.labels("rest").inc()
    return _respond(final, response_format, granularities)


def check_upload_size(request: Request, limit: int) -> None:
    """Refuse a too-large body from its Content-Length, before reading it."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + _MULTIPART_OVERHEAD:
        raise UploadTooLarge(
            f"the upload is {int(length)} bytes; the limit is {limit} bytes{_RAISE_UPLOAD}"
        )


def _validate(
    response_format: str, granularities: set[str], language: str | None, stream: bool
) -> None:
    if stream and response_format not in ("json", "text"):
        raise BadConfig(
            f"stream=true sends transcript.text events, as for response_format 'json' or "
            f"'text'; {response_format!r} needs stream=false"
        )
    if response_format not in RESPONSE_FORMATS:
        raise BadConfig(
            f"response_format must be one of {', '.join(RESPONSE_FORMATS)}; got {response_format!r}"
        )
    unknown = granularities - {"word", "segment"}
    if unknown:
        raise BadConfig(
            f"timestamp_granularities[] must be 'word' and/or 'segment'; got {sorted(unknown)}"
        )
    if language not in (None, "", "en", "english"):
        raise BadConfig(f"this model transcribes English only ('en'); got language={language!r}")


async def _read_upload(file: UploadFile, limit: int) -> bytes:
    if file.size is not None and file.size > limit:
        raise UploadTooLarge(
            f"the file is {file.size} bytes; the limit is {limit} bytes{_RAISE_UPLOAD}"
        )
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise UploadTooLarge(f"the file is larger than the {limit} bytes allowed{_RAISE_UPLOAD}")
    return data


async def _transcribe(
    res: Resources,
    blocks: AsyncIterable[F32],
    adapt_input: bool,
    profile: InputTransforms | None,
    hotwords: Hotwords,
    written: bool,
) -> Final:
    began = time.perf_counter()
    session, final = await transcribe(res.engine, blocks, adapt_input, profile, hotwords, written)
    observe_final(res, session, began)
    return final


def _respond(final: Final, response_format: str, granularities: set[str]) -> Response:
    if response_format == "json":
        return JSONResponse({"text": final.text})
    if response_format == "text":
        return PlainTextResponse(final.text + "\n")
    if response_format == "srt":
        return PlainTextResponse(srt(segments(final)), media_type="application/x-subrip")
    if response_format == "vtt":
        return PlainTextResponse(vtt(segments(final)), media_type="text/vtt")
    body = verbose(final, words="word" in granularities, segments_too="segment" in granularities)
    return JSONResponse(body.model_dump(exclude_none=True))


def openai_error(
    error: SessionError, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = OpenAIError(
        error=OpenAIErrorBody(
            message=error.message, type=error.openai_type, param=param, code=error.code
        )
    )
    return JSONResponse(body.model_dump(), status_code=error.http_status, headers=headers)
