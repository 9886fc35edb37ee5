"""The other two ways in, one utterance at real time each, measured like loadtest/client.py's
`/v1/stream` client and reported in the same `UtteranceResult`.

`/vosk`, as alphacep/vosk-server's clients speak it: `{"config": {"sample_rate": R}}`, then
binary PCM16 chunks on the live schedule, then `{"eof" : 1}`. The server answers every
chunk with one message (a partial, or the results of utterances that trailing silence
ended), answers eof with the last result and closes 1000. Errors come only as a close code
and reason (Vosk has no error message). Latency: eof sent -> last result received; the text
joins every result.

REST: the client "records" for the utterance's duration (at `speed`), then uploads it as a
WAV to `POST /v1/audio/transcriptions`, multipart with `model` and `file` as OpenAI's client
sends it. Latency: request sent -> response read (upload, decoding, transcription). urllib
blocks, so the request runs on an executor thread.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.error
import urllib.request
import uuid
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from loadtest.client import ClientConfig, Utterance, UtteranceResult, describe
from loadtest.scrape import http_base
from server.protocol import VoskAlternatives, VoskPartial, VoskResult

VOSK_PATH = "/vosk"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
EOF = '{"eof" : 1}'  # byte for byte what Vosk's clients send
NETWORK_ERRORS = (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed)
# no environment proxies: requests go only to the address the user gave
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def ws_endpoint(url: str, path: str) -> str:
    """ws://HOST:PORT[/anything] -> ws://HOST:PORT/path."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def auth(config: ClientConfig) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {config.token}"} if config.token else None


async def ws_connect(config: ClientConfig, path: str, **kwargs: Any) -> ClientConnection:
    """A WebSocket to `path` on the configured server, set up as client.py's stream is."""
    return await connect(
        ws_endpoint(config.url, path),
        open_timeout=config.connect_timeout_s,
        additional_headers=auth(config),
        compression=None,
        proxy=None,
        max_size=2**22,
        close_timeout=2,
        **kwargs,
    )


async def sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def paced(utt: Utterance, config: ClientConfig) -> AsyncIterator[bytes]:
    """The utterance in `chunk_ms` frames, frame i due at start + (i + 1) x period on an
    absolute clock (as loadtest/client.py sends), so slow sends never accumulate drift."""
    step = int(utt.sample_rate * config.chunk_ms / 1000) * 2
    period = config.chunk_ms / 1000 / config.speed
    start = time.perf_counter()
    for i, offset in enumerate(range(0, len(utt.pcm), step)):
        await sleep_until(start + (i + 1) * period)
        yield utt.pcm[offset : offset + step]


# -- /vosk ----------------------------------------------------------------------------------


@dataclass
class _VoskTimeline:
    eof_at: float | None = None
    results: list[tuple[float, str]] = field(default_factory=list)  # (received, text)
    closed_cleanly: bool = False  # the server closed with 1000
    error: str | None = None


Conversation = Callable[
    [ClientConnection, ClientConfig, Utterance, UtteranceResult], Awaitable[None]
]


async def ws_utterance(
    config: ClientConfig,
    path: str,
    utt: Utterance,
    talk: Conversation,
    sent: Utterance | None = None,
) -> UtteranceResult:
    """One utterance over its own WebSocket to `path`, `talk` speaking the protocol (with
    `sent`, the same words as the protocol needs them sent); never raises for network or
    server trouble, which becomes the result's failure."""
    result = UtteranceResult(utt.text, utt.duration, started=time.perf_counter())
    try:
        async with await ws_connect(config, path) as ws:
            await talk(ws, config, sent or utt, result)
    except NETWORK_ERRORS as e:
        result.failure = result.failure or describe(e)
    result.ended = time.perf_counter()
    if result.failure is None and result.eou_latency_ms is None:
        result.failure = "no final"
    return result


async def vosk_utterance(config: ClientConfig, utt: Utterance) -> UtteranceResult:
    """Send one utterance to /vosk at real time x speed."""
    return await ws_utterance(config, VOSK_PATH, utt, _vosk)


async def _vosk(
    ws: ClientConnection, config: ClientConfig, utt: Utterance, result: UtteranceResult
) -> None:
    await ws.send(json.dumps({"config": {"sample_rate": utt.sample_rate}}))
    seen = _VoskTimeline()
    receiver = asyncio.create_task(_vosk_receive(ws, seen))
    try:
        try:
            async for frame in paced(utt, config):
                if receiver.done():
                    break
                await asyncio.wait_for(ws.send(frame), config.final_timeout_s)
            if not receiver.done():
                seen.eof_at = time.perf_counter()
                await ws.send(EOF)
        except ConnectionClosed:
            pass  # the receiver saw why
        await asyncio.wait_for(receiver, config.final_timeout_s)
    except TimeoutError:
        result.failure = f"timeout: no final within {config.final_timeout_s:g} s of eof"
        return
    finally:
        receiver.cancel()
    _fill_vosk(result, seen)


async def _vosk_receive(ws: ClientConnection, seen: _VoskTimeline) -> None:
    """Every reply until the close: partials are counted out, results kept with their times."""
    try:
        async for raw in ws:
            now = time.perf_counter()
            message = json.loads(raw)
            if not isinstance(message, dict):
                raise ValueError(f"not a JSON object: {str(raw)[:80]}")
            if "partial" in message:
                VoskPartial.model_validate(message)
            elif "alternatives" in message:
                best = VoskAlternatives.model_validate(message).alternatives[0]
                seen.results.append((now, best.text))
            else:
                seen.results.append((now, VoskResult.model_validate(message).text))
        seen.closed_cleanly = ws.close_code == 1000
        if not seen.closed_cleanly:
            seen.error = f"closed {ws.close_code}: {ws.close_reason}"
    except ConnectionClosed as e:
        seen.error = describe(e)
    except ValueError as e:  # bad JSON or a message outside Vosk's protocol
        seen.error = f"bad message from the server: {e}"


def _fill_vosk(result: UtteranceResult, seen: _VoskTimeline) -> None:
    """The final is the last result, which must have come after eof and before a clean close."""
    last = seen.results[-1][0] if seen.results else None
    if seen.eof_at is None or not seen.closed_cleanly or last is None or last < seen.eof_at:
        result.failure = seen.error or "closed by the server before the final"
        return
    result.hypothesis = " ".join(text for _, text in seen.results if text)
    result.eou_latency_ms = (last - seen.eof_at) * 1000


# -- REST -----------------------------------------------------------------------------------


def wav_bytes(utt: Utterance) -> bytes:
    """The utterance as a mono PCM16 WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(utt.sample_rate)
        out.writeframes(utt.pcm)
    return buffer.getvalue()


def multipart(fields: dict[str, str], file: bytes, filename: str) -> tuple[bytes, str]:
    """A multipart/form-data body with `fields` and one audio file; (body, content type)."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        "\r\nContent-Type: audio/wav\r\n\r\n"
    )
    body = "".join(parts).encode() + file + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def post_transcription(config: ClientConfig, wav: bytes, timeout: float) -> tuple[int, Any]:
    """POST the file; (HTTP status, parsed JSON body). Raises OSError when no answer comes."""
    body, content_type = multipart({"model": "harken", "response_format": "json"}, wav, "a.wav")
    request = urllib.request.Request(
        http_base(config.url) + TRANSCRIPTIONS_PATH, data=body, method="POST"
    )
    request.add_header("Content-Type", content_type)
    for key, value in (auth(config) or {}).items():
        request.add_header(key, value)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            try:
                return e.code, json.loads(e.read())
            except ValueError:
                return e.code, None


async def rest_utterance(config: ClientConfig, utt: Utterance, pool: Executor) -> UtteranceResult:
    """Record for the utterance's duration, then upload it; never raises for network or
    server trouble."""
    result = await recorded(config, utt)
    await upload(config, utt, pool, result)
    return result


async def recorded(config: ClientConfig, utt: Utterance) -> UtteranceResult:
    """A result begun now, returned once the utterance has been "recorded" (its duration
    at `speed` has passed, on an absolute clock)."""
    result = UtteranceResult(utt.text, utt.duration, started=time.perf_counter())
    await sleep_until(result.started + utt.duration / config.speed)
    return result


async def upload(
    config: ClientConfig, utt: Utterance, pool: Executor | None, result: UtteranceResult
) -> None:
    """The upload half of `rest_utterance`, filling `result` (`pool` None: asyncio's
    default executor)."""
    timeout = config.connect_timeout_s + config.final_timeout_s
    sent = time.perf_counter()
    loop = asyncio.get_running_loop()
    try:
        status, body = await loop.run_in_executor(
            pool, post_transcription, config, wav_bytes(utt), timeout
        )
    except OSError as e:
        cause = unwrap(e)
        result.failure = describe(cause)
        if isinstance(cause, TimeoutError):
            result.failure = f"timeout: no response within {timeout:g} s"
    else:
        _fill_rest(result, status, body, time.perf_counter() - sent)
    result.ended = time.perf_counter()


def unwrap(error: OSError) -> OSError:
    """The socket's own error inside urllib's URLError (connection refused, a timeout)."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else None
    return reason if isinstance(reason, OSError) else error


def _fill_rest(result: UtteranceResult, status: int, body: Any, seconds: float) -> None:
    if status == 200 and isinstance(body, dict) and isinstance(body.get("text"), str):
        result.hypothesis = body["text"]
        result.eou_latency_ms = seconds * 1000
        return
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        result.failure = f"server error {error.get('code')} (HTTP {status}): {error.get('message')}"
    else:
        result.failure = f"rejected: HTTP {status}"
