"""Faults under load (issue 19): with several streams going, a fault fails only the streams it
touches, each with a typed error (or it still gets its correct final); every other stream
gets the offline transcript; and afterwards the server is ready and holds nothing.

Their one-stream versions live beside the features they test: a failed batch and a
shutdown with one stream in flight (test_lifecycle), one client vanishing beside one
steady stream and a full server's 1013 / 503 (test_bad_input), a dead decoder process
failing its proxy streams (test_decoder_procs). Two faults here found bugs, fixed with
their tests: the worker of a killed decoder process failed every later stream it got
(an unhandled exception, a bare 1006), and a client that stopped reading held its
stream, and the server's shutdown, for ever.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame
from websockets.http11 import Response
from websockets.sync.client import ClientConnection, connect
from websockets.uri import parse_uri

from server.config import ServerConfig
from server.decoder_procs import DecoderProcess
from server.dispatch import Runner, Work
from server.runner import F32, Chunk
from server.ws_frames import RefusingWebSocketProtocol
from tests.server.serving import (
    AUDIO_PCM,
    Running,
    assert_nothing_held,
    eventually,
    make_audio,
    pcm16,
    receive_all,
    running,
)
from tests.server.test_bad_input import post, wav_bytes

CONFIG = json.dumps({"type": "config", "sample_rate": 16000})
EOS = json.dumps({"type": "eos"})
HALF = len(AUDIO_PCM) // 4 * 2  # bytes: the first half of the utterance, whole samples
MAX_STREAMS = 10
WAIT = 30.0  # seconds: the longest any client waits for the server
Outcome = tuple[Any, ...]  # ("final", text) or ("error", code, close code)


@pytest.fixture(scope="module")
def busy(tiny_bundle: Path) -> Iterator[Running]:
    """A server for the faults: decoders in two processes (the default), room for
    MAX_STREAMS, and clients that leave results unread dropped after 2 s."""
    config = ServerConfig(
        dtype="fp32",
        bundle=str(tiny_bundle),
        max_streams=MAX_STREAMS,
        chunk_ms=80,
        send_timeout_s=2.0,
    )
    with running(config) as r:
        yield r


# -- clients ---------------------------------------------------------------------------------


def open_stream(server: Running, first: bytes = b"") -> ClientConnection:
    """A /v1/stream client that has sent its config and `first` audio."""
    ws = connect(f"{server.ws}/v1/stream", open_timeout=WAIT, close_timeout=5, legacy=True)
    ws.send(CONFIG)
    if first:
        ws.send(first)
    return ws


def finish(ws: ClientConnection, rest: bytes = b"") -> Outcome:
    """Send `rest` and eos (the server may have closed already); what the stream ended with."""
    with ws:
        with suppress(ConnectionClosed):
            if rest:
                ws.send(rest)
            ws.send(EOS)
        return outcome(ws, receive_all(ws, timeout=WAIT))


def outcome(ws: ClientConnection, messages: list[Any]) -> Outcome:
    assert messages, f"closed {ws.close_code} without a message"
    *partials, last = messages
    assert all(m["type"] == "partial" for m in partials), messages
    if last["type"] == "final":
        assert ws.close_code == 1000
        return ("final", last["text"])
    assert last["type"] == "error" and last["message"], last
    return ("error", last["code"], ws.close_code)


def whole_streams(server: Running, n: int) -> list[Outcome]:
    """`n` streams of the test utterance at once."""
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: finish(open_stream(server), AUDIO_PCM), range(n)))


def finish_all(clients: Sequence[ClientConnection], rest: bytes) -> list[Outcome]:
    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(lambda ws: finish(ws, rest), clients))


class RawClient:
    """A WebSocket client on a bare socket: it reads nothing past the handshake until told
    to, and can vanish without a close handshake or a FIN."""

    def __init__(self, url: str, rcvbuf: int | None = None) -> None:
        uri = parse_uri(url)
        self.sock = socket.socket()
        if rcvbuf:  # before connect, so that the TCP window stays that small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(WAIT)
        self.sock.connect((uri.host, uri.port))
        self.proto = ClientProtocol(uri)
        self.proto.send_request(self.proto.connect())
        self.sock.sendall(b"".join(self.proto.data_to_send()))
        events: Sequence[object] = []
        while not events:  # byte by byte, so that nothing after the handshake is read
            byte = self.sock.recv(1)
            assert byte, "the server closed during the handshake"
            self.proto.receive_data(byte)
            events = self.proto.events_received()
        assert isinstance(events[0], Response) and events[0].status_code == 101, events

    def send(self, *messages: str | bytes) -> None:
        for m in messages:
            if isinstance(m, str):
                self.proto.send_text(m.encode())
            else:
                self.proto.send_binary(m)
        self.sock.sendall(b"".join(self.proto.data_to_send()))

    def vanish(self) -> None:
        """Gone at once: a TCP reset, no close frame, no FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def read_to_end(self) -> tuple[list[Frame], str]:
        """Read what the server sent until it closed: the frames, and how it ended
        ('close CODE REASON', 'eof' or 'reset')."""
        frames: list[Frame] = []
        ending = "eof"
        try:
            while data := self.sock.recv(1 << 16):
                self.proto.receive_data(data)
                frames += [e for e in self.proto.events_received() if isinstance(e, Frame)]
        except ConnectionResetError:
            ending = "reset"
        finally:
            self.sock.close()
        if (close := self.proto.close_rcvd) is not None:
            ending = f"close {close.code} {close.reason}"
        return frames, ending


# -- afterwards ------------------------------------------------------------------------------


def assert_serving(server: Running, expected: str) -> None:
    """Ready, holding no stream anywhere (slots, dispatcher, model, decoder processes), and
    transcribing a new stream correctly."""
    assert_nothing_held(server)
    assert httpx.get(f"{server.url}/readyz").status_code == 200
    processes = [d for d in server.resources.engine.pool._decoders if isinstance(d, DecoderProcess)]
    assert processes, "the server should decode in processes (its default)"

    def decoders_empty() -> bool:
        gc.collect()  # a dropped stream's proxy tells its process when it is collected
        return all(p.open_streams() == 0 for p in processes)

    eventually(decoders_empty)
    assert whole_streams(server, 1) == [("final", expected)]


def waiting_for_readers(server: Running) -> int:
    """WebSocket connections whose next send waits for the client to read (over 64 KiB of
    results unsent)."""
    return sum(
        isinstance(c, RefusingWebSocketProtocol) and not c.writable.is_set()
        for c in list(server.server.server_state.connections)
    )


def errors_counted(server: Running, code: str) -> float:
    """The server's `harken_errors_total` for `code`."""
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(f'harken_errors_total{{kind="{code}"}}'):
            return float(line.split()[-1])
    return 0.0


# -- 1: a decoder process killed -------------------------------------------------------------


def test_a_decoder_process_killed_mid_stream_fails_only_its_streams_and_is_replaced(
    busy: Running, expected: str
) -> None:
    """The streams whose decoder state died with the process get `decoder_error`; the
    others, on the other process, finish; the next streams on that worker get a new
    process (they got an unhandled exception, a bare 1006, for as long as the server ran)."""
    pool, runner = busy.resources.engine.pool, busy.resources.engine.dispatcher.runner
    victim = pool._decoders[0]
    assert isinstance(victim, DecoderProcess)
    with ExitStack() as stack:
        clients = [stack.enter_context(open_stream(busy, AUDIO_PCM[:HALF])) for _ in range(6)]
        eventually(lambda: runner.streams == 6)  # type: ignore[attr-defined]
        dead = victim._child
        os.kill(dead._proc.pid, signal.SIGKILL)
        eventually(lambda: not dead.alive)
        outcomes = finish_all(clients, AUDIO_PCM[HALF:])
    # six streams in a row alternate between the two workers: three lived in the victim
    assert sorted(outcomes) == [("error", "decoder_error", 1011)] * 3 + [("final", expected)] * 3
    assert whole_streams(busy, 4) == [("final", expected)] * 4  # two on the victim's worker
    assert victim._child is not dead and victim._child.alive
    assert_serving(busy, expected)


# -- 2: a model batch that raises ------------------------------------------------------------


class FailNewStream:
    """The real runner, except that once armed, the first batch with a stream it has not
    run before raises (a device error, say); `failed` holds that batch's streams."""

    def __init__(self, runner: Runner[Chunk, F32]) -> None:
        self.runner, self.armed = runner, False
        self.seen: set[int] = set()
        self.failed: list[int] = []
        self.last_batch = time.monotonic()  # when the latest batch finished

    async def run(self, batch: Sequence[Work[Chunk]]) -> Sequence[F32]:
        streams = [w.stream for w in batch]
        if self.armed and not self.seen.issuperset(streams):
            self.armed, self.failed = False, streams
            raise RuntimeError("device lost")
        self.seen.update(streams)
        try:
            return await self.runner.run(batch)
        finally:
            self.last_batch = time.monotonic()

    def quiet(self, seconds: float) -> bool:
        """No batch has finished for `seconds`: the streams have stepped all they were sent."""
        return time.monotonic() - self.last_batch > seconds

    def release(self, stream: int) -> None:
        self.runner.release(stream)

    @property
    def streams(self) -> int:
        return int(self.runner.streams)  # type: ignore[attr-defined]


def test_a_failed_batch_under_load_fails_only_its_own_stream(busy: Running, expected: str) -> None:
    dispatcher = busy.resources.engine.dispatcher
    before = errors_counted(busy, "model_error")
    real, failing = dispatcher.runner, FailNewStream(dispatcher.runner)
    dispatcher.runner = failing
    try:
        with ExitStack() as stack:
            # each healthy stream's first half goes through the model (in one step or a few,
            # each after the stream's partial), until nothing is queued
            steady = [stack.enter_context(open_stream(busy, AUDIO_PCM[:HALF])) for _ in range(5)]
            eventually(lambda: len(failing.seen) == 5 and failing.quiet(0.5))
            failing.armed = True
            unlucky = stack.enter_context(open_stream(busy, AUDIO_PCM))
            assert finish(unlucky) == ("error", "model_error", 1011)
            assert len(failing.failed) == 1, "the healthy streams had nothing queued"
            assert finish_all(steady, AUDIO_PCM[HALF:]) == [("final", expected)] * 5
    finally:
        dispatcher.runner = real
    assert errors_counted(busy, "model_error") == before + 1
    assert_serving(busy, expected)


# -- 3: clients that vanish ------------------------------------------------------------------


def test_a_tenth_of_the_clients_vanishing_mid_stream_disturbs_no_other(
    busy: Running, expected: str
) -> None:
    res = busy.resources
    with ExitStack() as stack:
        steady = [stack.enter_context(open_stream(busy, AUDIO_PCM[:HALF])) for _ in range(9)]
        vanishing = RawClient(f"{busy.ws}/v1/stream")
        vanishing.send(CONFIG, AUDIO_PCM[:HALF])
        eventually(lambda: res.engine.dispatcher.runner.streams == 10)  # type: ignore[attr-defined]
        vanishing.vanish()  # one in ten: a reset, no close handshake
        eventually(lambda: res.slots.in_use == 9)  # the server noticed, and freed its stream
        assert finish_all(steady, AUDIO_PCM[HALF:]) == [("final", expected)] * 9
    assert_serving(busy, expected)


# -- 4: clients that stop reading ------------------------------------------------------------


def stall(server: Running) -> tuple[RawClient, threading.Thread]:
    """A Vosk client that sends and never reads, once the server's sends to it wait; and
    the thread still sending its frames."""
    stalled = RawClient(f"{server.ws}/vosk", rcvbuf=4096)
    long_partials = pcm16(make_audio(60.0))  # each reply then carries ~1.5 kB of text
    stalled.send('{"config": {"sample_rate": 16000}}', long_partials)

    def send_frames() -> None:  # 20,000 replies: several times what the socket buffers hold
        with suppress(OSError):  # the server may reset the connection first
            stalled.send(*[b"\x00\x00" * 8] * 20_000)

    frames = threading.Thread(target=send_frames, daemon=True)
    frames.start()
    eventually(lambda: waiting_for_readers(server) == 1, timeout=WAIT)
    return stalled, frames


def test_a_client_that_stops_reading_is_dropped_and_the_others_stream_on(
    busy: Running, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A Vosk client answers every frame, so one that sends and never reads fills what the
    server buffers for it (64 KiB past the kernel's socket buffers) in a second or two. The
    healthy streams finish meanwhile, and once a send has waited `send_timeout_s`, the
    server drops the stalled client with a reason (before, it held its stream, and held
    up shutdown, for ever)."""
    caplog.set_level(logging.INFO, logger="harken")
    res = busy.resources
    before = errors_counted(busy, "slow_reader")
    stalled, frames = stall(busy)
    assert whole_streams(busy, 5) == [("final", expected)] * 5  # while it is stalled
    eventually(lambda: errors_counted(busy, "slow_reader") == before + 1, timeout=WAIT)
    eventually(lambda: res.slots.in_use == 0)
    assert [r for r in caplog.records if "stopped reading" in r.getMessage()]
    _, ending = stalled.read_to_end()
    # a client with audio still unread by the server is reset (the kernel's rule for a
    # socket closed with unread input); one without gets the close and its reason
    assert ending == "reset" or ending.startswith("close 1008 results went unread"), ending
    frames.join(WAIT)
    assert_serving(busy, expected)


# -- 5: a burst of connections ---------------------------------------------------------------


def test_a_burst_of_three_times_max_streams_admits_max_streams(
    busy: Running, expected: str
) -> None:
    """3 x max_streams clients connect at once; max_streams of them are admitted and get
    their finals, the rest get `overloaded` and 1013 with a reason, and a file upload
    meanwhile 503."""
    res, n = busy.resources, 3 * MAX_STREAMS
    connected = threading.Barrier(n + 1, timeout=WAIT)

    def client() -> tuple[Outcome, str | None]:
        ws = connect(f"{busy.ws}/v1/stream", open_timeout=WAIT, close_timeout=5, legacy=True)
        connected.wait()  # every slot is decided once all are connected
        connected.wait()  # and the uploads have been refused
        with suppress(ConnectionClosed):  # the refused may be closed already
            ws.send(CONFIG)
        return finish(ws, AUDIO_PCM), ws.close_reason

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(client) for _ in range(n)]
        connected.wait()
        assert res.slots.in_use == MAX_STREAMS
        upload = post(busy, wav_bytes(np.frombuffer(AUDIO_PCM, "<i2") / 32768))
        assert upload.status_code == 503 and upload.json()["error"]["code"] == "overloaded"
        connected.wait()
        results = [f.result(timeout=WAIT) for f in futures]
    outcomes = sorted(o for o, _ in results)
    refused = [("error", "overloaded", 1013)] * (n - MAX_STREAMS)
    assert outcomes == refused + [("final", expected)] * MAX_STREAMS
    assert all("slots" in str(why) for o, why in results if o[0] == "error")
    assert_serving(busy, expected)


# -- 6: shutdown under load ------------------------------------------------------------------


def test_shutdown_under_load_finishes_every_stream_in_flight_and_refuses_new_ones(
    tiny_bundle: Path, expected: str
) -> None:
    """What SIGTERM sets off: no new connections; on connections still open, /readyz 503
    and new requests 503 `shutting_down`; every stream in flight gets its final; then the
    server exits, well within the grace period."""
    grace = 20.0
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), shutdown_grace_s=grace)
    with running(config) as r, httpx.Client(base_url=r.url) as kept_alive:
        assert kept_alive.get("/readyz").status_code == 200  # opens the connection
        clients = [open_stream(r, AUDIO_PCM[:HALF]) for _ in range(6)]
        eventually(lambda: r.resources.slots.in_use == 6)
        began = time.monotonic()
        r.server.should_exit = True  # what uvicorn's SIGTERM handler does
        eventually(lambda: r.resources.slots.draining)
        with pytest.raises(OSError):
            connect(f"{r.ws}/v1/stream", open_timeout=2)
        assert kept_alive.get("/readyz").status_code == 503
        upload = kept_alive.post(
            "/v1/audio/transcriptions",
            files={"file": ("a.wav", wav_bytes(np.zeros(1600, np.float32)))},
            data={"model": "x"},
        )
        assert upload.status_code == 503 and upload.json()["error"]["code"] == "shutting_down"
        assert finish_all(clients, AUDIO_PCM[HALF:]) == [("final", expected)] * 6
        r.thread.join(grace)
        assert not r.thread.is_alive(), "the server did not exit once its streams ended"
        assert time.monotonic() - began < grace


def test_shutdown_is_not_held_up_by_a_client_that_stopped_reading(
    tiny_bundle: Path, expected: str
) -> None:
    """The streams in flight finish, the stalled client is dropped after `send_timeout_s`,
    and the server exits (it waited out the grace period and then hung for as long as
    the client kept its connection open)."""
    grace = 20.0
    config = ServerConfig(
        dtype="fp32", bundle=str(tiny_bundle), shutdown_grace_s=grace, send_timeout_s=1.0
    )
    with running(config) as r:
        stalled, frames = stall(r)
        clients = [open_stream(r, AUDIO_PCM[:HALF]) for _ in range(3)]
        eventually(lambda: r.resources.slots.in_use == 4)
        began = time.monotonic()
        r.server.should_exit = True
        eventually(lambda: r.resources.slots.draining)
        assert finish_all(clients, AUDIO_PCM[HALF:]) == [("final", expected)] * 3
        r.thread.join(grace)
        assert not r.thread.is_alive(), "a client that stopped reading held up the shutdown"
        assert time.monotonic() - began < grace
        stalled.sock.close()
        frames.join(WAIT)
