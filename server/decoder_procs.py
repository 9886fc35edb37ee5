"""Decoders in child processes, one per decoder worker.

The beam search's frame loops are compiled and release the GIL, but its LM lookups and
per-frame driving are Python, so two decoder threads still decode slower than one
(experiments/server/workers.md: 215 against 273 audio s/s) while two processes decode in
parallel (395). The DecoderPool pairs each of its worker threads with one `DecoderProcess`
(stream affinity and ordering stay the pool's); the thread blocks on its child's pipe, which
releases the GIL. A stream's decoder state lives in its child, keyed by a stream id; the
parent holds a small proxy.

A child that dies (killed, out of memory) fails the streams it held with a clear error;
the next stream started on its worker starts a new child first, so the worker serves on.
"""

from __future__ import annotations

import collections
import itertools
import logging
import multiprocessing
import threading
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from models.config import ModelConfig
from server.decoding import Decoder, DecoderStream, HypothesisLike, Outcome, build_decoder
from server.memory import settle_heap

F32 = npt.NDArray[np.float32]
log = logging.getLogger("harken.server")


class DecoderProcessError(RuntimeError):
    """The child process failed or is gone."""


def _serve(
    conn: Connection, bundle: str, model: dict[str, Any], kind: str, search: dict[str, float]
) -> None:
    """The child's loop: one decoder, its streams by id, one request at a time."""
    try:
        decoder = build_decoder(bundle, ModelConfig.from_dict(model), kind, search)
    except Exception as e:  # a bad bundle: the parent raises this as the start-up error
        conn.send((False, f"{type(e).__name__}: {e}"))
        return
    streams: dict[int, DecoderStream] = {}
    settle_heap()
    conn.send((True, None))  # ready
    while True:
        try:
            op, sid, args = conn.recv()
        except (EOFError, OSError):
            return
        if op == "close":  # no reply: a proxy was dropped without finalize
            streams.pop(sid, None)
        elif op == "batch":  # several streams' calls in one message, answered in one
            conn.send((True, [_handle(decoder, streams, *call) for call in args]))
        else:
            conn.send(_handle(decoder, streams, op, sid, args))


def _handle(
    decoder: Decoder, streams: dict[int, DecoderStream], op: str, sid: int, args: tuple[Any, ...]
) -> tuple[bool, Any]:
    """One call in the child: (True, its value) or (False, (error type, message)), which the
    parent re-raises for this stream only."""
    try:
        if op == "open":
            value: Any = len(streams)
        elif op == "start":
            streams[sid] = decoder.start(*args)
            value = None
        elif op == "finalize":
            value = list(streams.pop(sid).finalize())
        elif op == "advance_and_partial":
            streams[sid].advance(*args)
            value = streams[sid].partial()
        else:
            value = getattr(streams[sid], op)(*args)
        return True, value
    except Exception as e:
        return False, (type(e).__name__, str(e))


class _Child:
    """One child process and its pipe; calls are serialised by a lock.

    Streams whose proxies were dropped without `finalize` are only queued here and closed
    by the next call: garbage collection can run on any thread, the event loop included,
    and must never wait for the lock while another stream's decoder call is in flight."""

    def __init__(
        self, bundle: str, model: ModelConfig, kind: str, search: Mapping[str, float]
    ) -> None:
        self.spec = (bundle, model, kind, search)  # what a replacement is built from
        ctx = multiprocessing.get_context("spawn")  # never fork a process running threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve,
            args=(child, bundle, model.to_dict(), kind, dict(search)),
            daemon=True,
        )
        self._proc.start()
        child.close()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._dropped: collections.deque[int] = collections.deque()  # appends are atomic

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Wait until the child has built its decoder (imports, LM load)."""
        if not self._conn.poll(timeout_s):
            raise DecoderProcessError(f"the decoder process did not start in {timeout_s:g} s")
        try:
            ok, error = self._conn.recv()
        except (EOFError, OSError) as e:
            raise DecoderProcessError(f"the decoder process failed to start ({e})") from None
        if not ok:
            raise DecoderProcessError(f"the decoder could not be built: {error}")

    def call(self, op: str, sid: int, *args: Any) -> Any:
        with self._lock:
            try:
                while self._dropped:
                    self._conn.send(("close", self._dropped.popleft(), ()))
                self._conn.send((op, sid, args))
                reply = self._conn.recv()
            except (EOFError, OSError) as e:
                raise DecoderProcessError(f"the decoder process is gone ({e})") from None
        return _value(reply)

    def call_many(self, calls: Sequence[tuple[str, int, tuple[Any, ...]]]) -> list[Outcome]:
        """Several streams' calls (op, stream id, args) in one round trip, run in order; per
        call its value or the exception it raised (a gone child fails them all)."""
        replies = self.call("batch", -1, *calls)
        out: list[Outcome] = []
        for reply in replies:
            try:
                out.append((True, _value(reply)))
            except Exception as e:
                out.append((False, e))
        return out

    def close_stream(self, sid: int) -> None:
        """Free a dropped stream's state at the next call (never blocks)."""
        self._dropped.append(sid)

    def new_id(self) -> int:
        return next(self._ids)

    @property
    def alive(self) -> bool:
        return self._proc.is_alive()

    @property
    def exitcode(self) -> int | None:
        return self._proc.exitcode

    def close(self) -> None:
        self._conn.close()
        self._proc.join(timeout=2.0)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=2.0)


def _value(reply: tuple[bool, Any]) -> Any:
    ok, value = reply
    if not ok:
        name, message = value
        raise (ValueError if name == "ValueError" else DecoderProcessError)(message)
    return value


class _RemoteStream:
    """A DecoderStream whose state lives in a child process."""

    def __init__(self, child: _Child, hotwords: Sequence[str]) -> None:
        self._child, self._sid = child, child.new_id()
        child.call("start", self._sid, tuple(hotwords))
        self._closer = weakref.finalize(self, child.close_stream, self._sid)

    def advance(self, log_probs: F32, threshold: float | None = None) -> None:
        self._child.call("advance", self._sid, log_probs, threshold)

    def partial(self) -> HypothesisLike:
        result: HypothesisLike = self._child.call("partial", self._sid)
        return result

    def advance_and_partial(self, log_probs: F32, threshold: float | None = None) -> HypothesisLike:
        """Both in one round trip to the child (a live stream asks for a partial after
        every step)."""
        result: HypothesisLike = self._child.call(
            "advance_and_partial", self._sid, log_probs, threshold
        )
        return result

    def finalize(self) -> Sequence[HypothesisLike]:
        self._closer.detach()  # the child drops the stream itself
        result: Sequence[HypothesisLike] = self._child.call("finalize", self._sid)
        return result

    def batched(self, op: str, *args: Any) -> tuple[_Child, tuple[str, int, tuple[Any, ...]]]:
        """This call as a request for `_Child.call_many`, with the child it goes to (the
        DecoderPool sends a worker's queued calls for one child as one message)."""
        if op == "finalize":
            self._closer.detach()
        return self._child, (op, self._sid, args)


class DecoderProcess:
    """A Decoder whose streams run in one child process. The DecoderPool gives each of its
    worker threads its own, so a child only ever serves one thread's calls in order."""

    def __init__(self, child: _Child) -> None:
        self._child = child

    def start(self, hotwords: Sequence[str] = ()) -> DecoderStream:
        if not self._child.alive:
            self._replace_child()
        return _RemoteStream(self._child, hotwords)

    def _replace_child(self) -> None:
        """Start a new child for a dead one (whose streams have failed with 'gone')."""
        dead = self._child
        log.warning("a decoder process died (exit code %s); starting another", dead.exitcode)
        dead.close()
        child = _Child(*dead.spec)
        try:
            child.wait_ready()
        except DecoderProcessError:
            child.close()
            raise
        self._child = child

    def open_streams(self) -> int:
        """Streams the child holds (closes of dropped streams applied first)."""
        return int(self._child.call("open", -1))

    def close(self) -> None:
        self._child.close()


def start_processes(
    bundle: str | Path,
    model: ModelConfig,
    kind: str,
    count: int,
    search: Mapping[str, float] | None = None,
) -> list[DecoderProcess]:
    """`count` decoder processes, started together (each loads the LM) and ready; if one
    fails, all are stopped and its reason raised. `search`: as `build_decoder`'s."""
    children = [_Child(str(bundle), model, kind, search or {}) for _ in range(count)]
    try:
        for child in children:
            child.wait_ready()
    except DecoderProcessError:
        for child in children:
            child.close()
        raise
    return [DecoderProcess(child) for child in children]
