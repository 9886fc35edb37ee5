"""One streaming client of `/v1/stream`: an utterance paced at real time, and its timings.

The client behaves like a live microphone. Chunk i of `chunk_ms` audio is sent when it
would have been captured, at `start + (i + 1) * chunk_ms / speed`, on an absolute schedule
so that slow sends never accumulate drift; the `{"type": "eos"}` follows the last chunk at
once. Times come from `time.perf_counter` and are reported in milliseconds:

    end-of-utterance latency  eos sent -> final received (DS2 §7's latency)
    time to first partial     first audio frame sent -> first partial received
    partial gaps              between consecutive partials (how often the text refreshes)

Every wait is bounded (connect, each send, the final after eos), so a client always ends;
anything that keeps an utterance from its final is a failure with a reason.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from server.protocol import EndOfStream, Error, Final, Partial

MIN_CHUNK_MS, MAX_CHUNK_MS = 20, 200
STREAM_PATH = "/v1/stream"
# what a sweep's clients may speak: /v1/stream (here), /vosk (loadtest/protocols.py) and
# OpenAI's Realtime transcription at /v1/realtime (loadtest/realtime.py)
LIVE_PROTOCOLS = ("stream", "vosk", "realtime")


@dataclass(frozen=True)
class Utterance:
    """One manifest line, ready to send."""

    pcm: bytes  # mono pcm_s16le
    sample_rate: int  # Hz, as recorded (the server resamples)
    text: str  # reference transcript
    name: str = ""  # the manifest's audio path, for reports

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        return len(self.pcm) / 2 / self.sample_rate


@dataclass(frozen=True)
class ClientConfig:
    url: str  # ws://HOST:PORT or ws://HOST:PORT/v1/stream
    chunk_ms: int = 100  # audio per WebSocket frame, 20..200 ms
    speed: float = 1.0  # 1 = real time; 2 = audio sent twice as fast
    partials: bool = True  # ask the server for partial results
    token: str | None = None  # bearer token, when the server requires one
    connect_timeout_s: float = 10.0  # longest wait for the WebSocket handshake
    final_timeout_s: float = 10.0  # longest wait for the final after eos
    protocol: str = "stream"  # what a sweep's clients speak: one of LIVE_PROTOCOLS

    def __post_init__(self) -> None:
        if not MIN_CHUNK_MS <= self.chunk_ms <= MAX_CHUNK_MS:
            raise ValueError(
                f"chunk_ms must be {MIN_CHUNK_MS}..{MAX_CHUNK_MS} ms, got {self.chunk_ms}"
            )
        if not self.speed > 0:
            raise ValueError(f"speed must be > 0 (1 = real time), got {self.speed}")
        if urlsplit(self.url).scheme not in ("ws", "wss"):
            raise ValueError(f"url must start with ws:// or wss://, got {self.url!r}")
        if self.protocol not in LIVE_PROTOCOLS:
            raise ValueError(f"protocol must be one of {LIVE_PROTOCOLS}, got {self.protocol!r}")

    @classmethod
    def from_args(cls, args: Any) -> ClientConfig:
        """The clients `harken loadtest`'s flags describe (every mode: sweep, soak, profile)."""
        return cls(
            url=args.url[0] if args.url else "ws://127.0.0.1:0",
            chunk_ms=args.chunk_ms,
            speed=args.speed,
            partials=not args.no_partials,
            token=args.token,
            connect_timeout_s=args.connect_timeout_s,
            final_timeout_s=args.final_timeout_s,
            protocol=getattr(args, "protocol", "stream"),
        )

    @property
    def stream_url(self) -> str:
        parts = urlsplit(self.url)
        path = parts.path if parts.path not in ("", "/") else STREAM_PATH
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


@dataclass
class UtteranceResult:
    reference: str
    audio_s: float  # seconds of audio sent
    hypothesis: str = ""  # the final's text
    eou_latency_ms: float | None = None  # eos sent -> final received
    first_partial_ms: float | None = None  # first audio sent -> first partial received
    partial_gaps_ms: list[float] = field(default_factory=list)
    failure: str | None = None  # why no final came; None when it did
    started: float = 0.0  # perf_counter at connect
    ended: float = 0.0  # perf_counter when the utterance was over

    @property
    def ok(self) -> bool:
        return self.failure is None and self.eou_latency_ms is not None


@dataclass
class _Timeline:
    """What the receiver saw, in perf_counter seconds."""

    partials: list[float] = field(default_factory=list)
    eos_at: float | None = None  # set by the sender just before eos goes out
    segments: list[str] = field(default_factory=list)  # finals before eos (endpointing)
    final_at: float | None = None
    final: Final | None = None
    error: str | None = None  # a server error message or an abnormal close


async def stream_utterance(config: ClientConfig, utt: Utterance) -> UtteranceResult:
    """Send one utterance at real time x speed; never raises for network or server trouble."""
    result = UtteranceResult(utt.text, utt.duration, started=time.perf_counter())
    try:
        await _stream(config, utt, result)
    except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
        result.failure = result.failure or describe(e)
    result.ended = time.perf_counter()
    if result.failure is None and result.eou_latency_ms is None:
        result.failure = "no final"
    return result


async def _stream(config: ClientConfig, utt: Utterance, result: UtteranceResult) -> None:
    headers = {"Authorization": f"Bearer {config.token}"} if config.token else None
    async with connect(
        config.stream_url,
        open_timeout=config.connect_timeout_s,
        additional_headers=headers,
        compression=None,  # audio does not compress; deflate would only cost client CPU
        proxy=None,  # traffic goes only to the address given, never via an environment proxy
        max_size=2**22,
        close_timeout=2,
    ) as ws:
        # the receiver starts first: a server that refuses the stream (no free slot) sends its
        # error and closes before the config goes out, and that error is the failure's reason
        timeline = _Timeline()
        receiver = asyncio.create_task(_receive(ws, timeline))
        try:
            first_sent, eos_at = await _send_paced(ws, utt, config, receiver, timeline)
            # after eos: the final; without eos (the server ended first): its reason
            await asyncio.wait_for(receiver, config.final_timeout_s)
        except TimeoutError:
            result.failure = f"timeout: no final within {config.final_timeout_s:g} s of eos"
            return
        finally:
            receiver.cancel()
        _fill(result, timeline, first_sent, eos_at)


def _config_message(utt: Utterance, config: ClientConfig) -> dict[str, object]:
    return {
        "type": "config",
        "sample_rate": utt.sample_rate,
        "encoding": "pcm_s16le",
        "partials": config.partials,
    }


async def _send_paced(
    ws: ClientConnection,
    utt: Utterance,
    config: ClientConfig,
    receiver: asyncio.Task[None],
    timeline: _Timeline,
) -> tuple[float | None, float | None]:
    """The config, chunks on the live schedule, then eos. Returns (first frame sent, eos
    sent) times; eos is None when the server ended the stream first (its reason is in the
    timeline)."""
    step = int(utt.sample_rate * config.chunk_ms / 1000) * 2
    period = config.chunk_ms / 1000 / config.speed
    first_sent = None
    try:
        await ws.send(json.dumps(_config_message(utt, config)))
        start = time.perf_counter()
        for i, offset in enumerate(range(0, len(utt.pcm), step)):
            await _sleep_until(start + (i + 1) * period)
            if receiver.done():
                return first_sent, None
            frame = utt.pcm[offset : offset + step]
            await asyncio.wait_for(ws.send(frame), config.final_timeout_s)
            first_sent = first_sent or time.perf_counter()
        if receiver.done():
            return first_sent, None
        eos_at = timeline.eos_at = time.perf_counter()
        await ws.send(EndOfStream(type="eos").model_dump_json())
    except ConnectionClosed:
        return first_sent, None  # the receiver saw why (an error message or the close code)
    return first_sent, eos_at


async def _sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def _receive(ws: ClientConnection, timeline: _Timeline) -> None:
    """Record every server message until the final, an error, or the close."""
    try:
        async for raw in ws:
            now = time.perf_counter()
            message = json.loads(raw)
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "partial":
                Partial.model_validate(message)
                timeline.partials.append(now)
            elif kind == "final":
                final = Final.model_validate(message)
                if timeline.eos_at is None:  # an endpoint inside the stream, not its end
                    timeline.segments.append(final.text)
                    continue
                timeline.final, timeline.final_at = final, now
                return
            elif kind == "error":
                error = Error.model_validate(message)
                timeline.error = f"server error {error.code}: {error.message}"
                return
            else:
                timeline.error = f"unexpected message: {str(raw)[:80]}"
                return
        timeline.error = timeline.error or "closed by the server before the final"
    except ConnectionClosed as e:
        timeline.error = describe(e)
    except ValueError as e:  # bad JSON or a message that breaks the protocol
        timeline.error = f"bad message from the server: {e}"


def _fill(
    result: UtteranceResult, timeline: _Timeline, first_sent: float | None, eos_at: float | None
) -> None:
    if timeline.final is None or timeline.final_at is None or eos_at is None:
        result.failure = timeline.error or "closed by the server before the final"
        return
    result.hypothesis = " ".join(t for t in [*timeline.segments, timeline.final.text] if t)
    result.eou_latency_ms = (timeline.final_at - eos_at) * 1000
    if timeline.partials and first_sent is not None:
        result.first_partial_ms = (timeline.partials[0] - first_sent) * 1000
    times = timeline.partials
    result.partial_gaps_ms = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]


def describe(error: BaseException) -> str:
    """A short, stable reason for a failure, fit to group by."""
    if isinstance(error, InvalidStatus):
        return f"rejected: HTTP {error.response.status_code}"
    if isinstance(error, ConnectionClosed):
        close = error.rcvd
        if close is None:
            return "connection lost (no close frame)"
        return f"closed {close.code}: {close.reason}" if close.reason else f"closed {close.code}"
    if isinstance(error, TimeoutError):
        return "timeout: connect or send"
    if isinstance(error, ConnectionRefusedError):
        return "unreachable: connection refused"
    if isinstance(error, OSError):
        return f"unreachable: {error.strerror or error}"
    return f"{type(error).__name__}: {error}"
