"""Clients that misbehave on purpose, for a soak's faults (loadtest/faults.py): one that
vanishes mid-stream, one that stops reading its results, and a burst of connections past
the server's `--max-streams`. Each reports what happened to it in an `UtteranceResult`
whose `failure` says how it ended (for these clients an ending is the point, not a fault).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from loadtest.client import STREAM_PATH, ClientConfig, Utterance, UtteranceResult, describe
from loadtest.protocols import NETWORK_ERRORS, VOSK_PATH, paced, ws_connect

STALL_RCVBUF = 4096  # bytes: the stalled client's receive buffer, so that it fills at once
STALL_AUDIO_S = 20.0  # audio sent at once first, so that every later reply is a long partial
STALL_FRAME = 16  # bytes (8 samples) per later frame: each one costs the server a reply
STALL_BATCH, STALL_PAUSE_S = 20, 0.002  # frames sent between pauses (at most ~10,000 a second)
BURST_AUDIO_S = 0.5  # audio each admitted connection of a burst sends, at once


def stream_config(utt: Utterance, config: ClientConfig) -> str:
    return json.dumps(
        {
            "type": "config",
            "sample_rate": utt.sample_rate,
            "encoding": "pcm_s16le",
            "partials": config.partials,
        }
    )


def drop(ws: ClientConnection) -> None:
    """Gone at once: a TCP reset, no close frame, no FIN."""
    sock = ws.transport.get_extra_info("socket")
    with suppress(OSError):  # the connection may be closed already
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ws.transport.abort()


async def vanish(config: ClientConfig, utt: Utterance, fraction: float = 0.5) -> UtteranceResult:
    """/v1/stream: the config and the first `fraction` of the utterance at real time, then
    the client vanishes without a close."""
    result = UtteranceResult(utt.text, utt.duration, started=time.perf_counter())
    cut = int(len(utt.pcm) * fraction) // 2 * 2
    try:
        ws = await ws_connect(config, STREAM_PATH)
        await ws.send(stream_config(utt, config))
        async for frame in paced(replace(utt, pcm=utt.pcm[:cut]), config):
            await ws.send(frame)
        drop(ws)
        result.failure = f"vanished after {cut / 2 / utt.sample_rate:.2f} s of audio"
    except NETWORK_ERRORS as e:  # it never got as far as vanishing
        result.failure = f"could not vanish: {describe(e)}"
    result.ended = time.perf_counter()
    return result


def long_audio(utt: Utterance, seconds: float = STALL_AUDIO_S) -> bytes:
    """The utterance repeated to about `seconds`."""
    repeats = max(1, int(seconds / max(utt.duration, 0.1)))
    return utt.pcm * repeats


async def stall(config: ClientConfig, utt: Utterance, wait_s: float) -> UtteranceResult:
    """/vosk, which answers every frame: long audio, then small frames as fast as the socket
    takes them, reading nothing (a 4 KiB receive buffer, and websockets stops reading once
    one message waits). Ends when the server drops the client, or after `wait_s`; the
    failure says which ("dropped: ..." or "not dropped ...")."""
    result = UtteranceResult(utt.text, utt.duration, started=time.perf_counter())
    try:
        ws = await ws_connect(
            config, VOSK_PATH, sock=await _small_socket(config.url), max_queue=1, ping_interval=None
        )
    except NETWORK_ERRORS as e:
        result.failure = f"could not connect: {describe(e)}"
        result.ended = time.perf_counter()
        return result
    try:
        await asyncio.wait_for(_flood(ws, utt), wait_s)
        result.failure = "not dropped: the flood ended first"
    except TimeoutError:
        result.failure = f"not dropped within {wait_s:g} s"
    except NETWORK_ERRORS as e:
        result.failure = f"dropped: {describe(e)}"
    finally:
        drop(ws)
    result.ended = time.perf_counter()
    return result


async def _small_socket(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STALL_RCVBUF)  # before connect
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port or 80))
    except OSError:
        sock.close()
        raise
    return sock


async def _flood(ws: ClientConnection, utt: Utterance) -> None:
    await ws.send(json.dumps({"config": {"sample_rate": utt.sample_rate}}))
    audio = long_audio(utt)
    await ws.send(audio)
    for _ in range(10**7):  # bounded by the caller's timeout long before this
        for i, offset in enumerate(range(0, len(audio) - STALL_FRAME, STALL_FRAME)):
            await ws.send(audio[offset : offset + STALL_FRAME])  # waits once buffers are full
            if i % STALL_BATCH == 0:
                await asyncio.sleep(STALL_PAUSE_S)  # leave the load generator to the others


# -- a burst of connections -----------------------------------------------------------------


@dataclass
class Burst:
    """What `n` simultaneous connections got."""

    outcomes: list[str]  # per connection: "final", or how it was refused or failed
    probe: UtteranceResult | None  # the file upload made while the slots were taken
    connected_s: float  # from the first attempt until every one had connected or failed


async def burst(
    config: ClientConfig,
    n: int,
    hold_s: float,
    utt: Utterance,
    probe: Callable[[], Awaitable[UtteranceResult]] | None = None,
) -> Burst:
    """`n` /v1/stream connections at once. Once all are in, `probe` runs (a file upload,
    which should get 503) and the admitted hold their slots for `hold_s`; then each sends
    the first BURST_AUDIO_S of `utt` at once and eos, and reads its final, while the refused
    read their error (`overloaded`, then close 1013 with the reason)."""
    began = time.perf_counter()
    attempts = await asyncio.gather(*(_open(config) for _ in range(n)))
    connected_s = time.perf_counter() - began
    result = await probe() if probe else None
    await asyncio.sleep(hold_s)
    piece = replace(utt, pcm=utt.pcm[: int(BURST_AUDIO_S * utt.sample_rate) * 2])
    outcomes = await asyncio.gather(*(_finish(ws, config, piece) for ws in attempts))
    return Burst(list(outcomes), result, connected_s)


async def _open(config: ClientConfig) -> ClientConnection | str:
    try:
        return await ws_connect(config, STREAM_PATH, ping_interval=None)
    except NETWORK_ERRORS as e:
        return describe(e)


async def _finish(ws: ClientConnection | str, config: ClientConfig, utt: Utterance) -> str:
    """'final', or the error (or close) the connection ended with."""
    if isinstance(ws, str):
        return ws
    with suppress(ConnectionClosed):  # a refused connection may be closed already
        await ws.send(stream_config(utt, config))
        await ws.send(utt.pcm)
        await ws.send(json.dumps({"type": "eos"}))
    try:
        async with asyncio.timeout(config.final_timeout_s):
            async for raw in ws:
                message = json.loads(raw)
                if message.get("type") in ("final", "error"):
                    return _ending(message)
        return f"closed {ws.close_code}: {ws.close_reason}"
    except TimeoutError:
        return f"timeout: nothing within {config.final_timeout_s:g} s"
    except ConnectionClosed as e:
        return describe(e)
    except ValueError as e:
        return f"bad message from the server: {e}"
    finally:
        await ws.close()


def _ending(message: dict) -> str:
    if message["type"] == "final":
        return "final"
    return f"server error {message.get('code')}: {message.get('message')}"
