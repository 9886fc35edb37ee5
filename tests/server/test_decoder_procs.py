"""Decoders in worker processes give exactly the in-process results; a bad request fails
only its own stream; a dead process fails its streams with a clear error."""

from __future__ import annotations

import asyncio
import gc
import shutil
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from models.config import ModelConfig
from server.config import DEFAULT_BUNDLE, ServerConfig
from server.decoder_procs import DecoderProcess, DecoderProcessError, start_processes
from server.decoding import DecoderPool, DecoderStream, build_decoder
from server.engine import running_engine

F32 = npt.NDArray[np.float32]
MODEL = ModelConfig(conv_type="1d")


def _log_probs(seed: int, frames: int = 120) -> F32:
    logits = np.random.default_rng(seed).normal(0.0, 3.0, (frames, MODEL.vocab_size))
    logits[:, 0] += 3.0  # blank-heavy, as CTC outputs are
    out: F32 = (logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def procs() -> Iterator[list[DecoderProcess]]:
    processes = start_processes(DEFAULT_BUNDLE, MODEL, "beam", 2)
    yield processes
    for process in processes:
        process.close()


def test_streams_in_processes_decode_as_in_process(procs: list[DecoderProcess]) -> None:
    local = build_decoder(DEFAULT_BUNDLE, MODEL)
    workers = [ThreadPoolExecutor(1) for _ in range(2)]  # as the DecoderPool runs them
    try:
        for seed in range(4):
            lp = _log_probs(seed)

            def run(
                lp: F32 = lp, process: DecoderProcess = procs[seed % 2]
            ) -> list[tuple[str, float]]:
                stream = process.start()
                for i in range(0, len(lp), 16):
                    stream.advance(lp[i : i + 16])
                partial = stream.partial()
                assert partial.text.startswith(partial.stable_text)
                return [(h.text, h.score) for h in stream.finalize()]

            remote = workers[seed % 2].submit(run).result()
            mine = local.start()
            mine.advance(lp)
            assert remote == [(h.text, h.score) for h in mine.finalize()]
    finally:
        for w in workers:
            w.shutdown()


def test_serve_time_search_overrides_reach_the_decoder_processes() -> None:
    """`--beam-size`, `--beam-threshold` and `--blank-penalty` change the search in every
    decoder process: a narrow, tight search with a large blank penalty there decodes exactly
    as the same search in process, and reads some of these utterances differently from the
    bundle's own setting, and from the same narrow search without the penalty."""
    narrow_search = {"beam_width": 4, "score_threshold": 1.0}
    search = ServerConfig(beam_size=4, beam_threshold=1.0, blank_penalty=3.0).search
    assert search == narrow_search | {"blank_penalty": 3.0}
    (narrow,) = start_processes(DEFAULT_BUNDLE, MODEL, "beam", 1, search)
    local, unpenalised, tuned = (
        build_decoder(DEFAULT_BUNDLE, MODEL, "beam", search),
        build_decoder(DEFAULT_BUNDLE, MODEL, "beam", narrow_search | {"blank_penalty": 0.0}),
        build_decoder(DEFAULT_BUNDLE, MODEL),
    )
    try:
        from_tuned = from_unpenalised = False
        for seed in range(6):
            lp = _log_probs(seed)
            results: list[list[tuple[str, float]]] = []
            for decoder in (narrow, local, tuned, unpenalised):
                stream = decoder.start()
                stream.advance(lp)
                results.append([(h.text, h.score) for h in stream.finalize()])
            assert results[0] == results[1]
            from_tuned |= results[1] != results[2]
            from_unpenalised |= results[1][0][0] != results[3][0][0]
        assert from_tuned, "the overridden search read every utterance as the tuned one"
        assert from_unpenalised, "a blank penalty of 3 changed no transcript"
    finally:
        narrow.close()


def test_an_unknown_search_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown search settings .'beam_size'."):
        build_decoder(DEFAULT_BUNDLE, MODEL, "beam", {"beam_size": 4})


def test_a_bad_call_fails_only_its_stream(procs: list[DecoderProcess]) -> None:
    good = procs[0].start()
    bad = procs[0].start()
    with pytest.raises(ValueError, match="log_probs"):
        bad.advance(np.zeros((3, 5), np.float32))  # wrong width
    with pytest.raises(ValueError):
        procs[0].start(hotwords=["no digits 4 you"])
    good.advance(_log_probs(7))
    assert good.finalize()


def test_a_dead_process_fails_its_streams_clearly() -> None:
    (decoder,) = start_processes(DEFAULT_BUNDLE, MODEL, "greedy", 1)
    try:
        stream = decoder.start()
        decoder._child._proc.kill()
        decoder._child._proc.join()
        with pytest.raises(DecoderProcessError, match="gone"):
            stream.advance(_log_probs(1))
    finally:
        decoder.close()


def test_a_bundle_the_decoder_cannot_load_fails_at_start_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "decoder.json").write_text("{not json")
    with pytest.raises(DecoderProcessError, match="could not be built"):
        start_processes(tmp_path, MODEL, "beam", 2)


def test_a_dropped_stream_never_blocks_and_is_freed(procs: list[DecoderProcess]) -> None:
    """Dropping a proxy without finalize (a client that vanished) must not wait for the child
    while another stream's call is in flight, and the child frees the stream soon after."""
    process = procs[1]
    before = process.open_streams()
    stream = process.start()
    stream.advance(_log_probs(3))
    assert process.open_streams() == before + 1
    child = process._child
    holder = [stream]
    del stream

    def collect() -> None:  # garbage collection on some other thread
        holder.clear()
        gc.collect()

    with child._lock:  # another stream's call in flight on this child
        dropped = threading.Thread(target=collect)
        dropped.start()
        dropped.join(timeout=5.0)
        assert not dropped.is_alive(), "collecting a dropped stream waited for the child"
    assert process.open_streams() == before


def test_an_engine_whose_decoder_fails_to_start_reports_that_reason(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    """The serving engine tears down what it built and raises the decoder's own error (it
    once raised an UnboundLocalError from its clean-up instead)."""
    bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))
    (bundle / "decoder.json").write_text("{not json")

    async def start() -> None:
        async with running_engine(ServerConfig(dtype="fp32", bundle=str(bundle))):
            pass

    with pytest.raises(DecoderProcessError, match="could not be built"):
        asyncio.run(start())


def test_the_pool_gives_each_worker_its_own_process(procs: list[DecoderProcess]) -> None:
    """Stream s runs on worker s % 2, and worker i on process i: the pool is the one place
    that pairs threads with processes."""
    before = [p.open_streams() for p in procs]

    async def open_streams() -> list[DecoderStream]:
        pool = DecoderPool(procs)
        try:
            return [await pool.start(s) for s in (0, 2, 4, 1)]
        finally:
            pool.close()

    streams = asyncio.run(open_streams())
    assert [p.open_streams() - b for p, b in zip(procs, before, strict=True)] == [3, 1]
    for stream in streams:
        stream.finalize()
    with pytest.raises(ValueError, match="decoder workers must be >= 1"):
        DecoderPool([])


def test_calls_queued_together_travel_as_one_message_and_keep_their_own_results(
    procs: list[DecoderProcess],
) -> None:
    """Streams on one worker whose calls are queued while it is busy get them answered in one
    round trip; every stream gets the results of decoding alone, in its own order, and a bad
    call fails only its own stream."""
    local = build_decoder(DEFAULT_BUNDLE, MODEL)
    child = procs[0]._child
    messages: list[int] = []
    call_many = child.call_many

    def counted(calls: Sequence[tuple[str, int, tuple[Any, ...]]]) -> list[tuple[bool, Any]]:
        messages.append(len(calls))
        return call_many(calls)

    async def run() -> tuple[list[list[str]], list[object], BaseException | None]:
        pool = DecoderPool(procs)
        try:
            streams = [await pool.start(s) for s in (0, 2, 4)]  # all on worker 0, process 0
            hold = threading.Event()
            busy = pool.submit(0, hold.wait, 5.0)  # the worker is busy: calls queue up
            lps = [_log_probs(10 + k) for k in range(3)]
            futures = []
            for i in range(0, 120, 24):
                for s, stream, lp in zip((0, 2, 4), streams, lps, strict=True):
                    chunk = lp[i : i + 24] if s != 2 or i != 48 else np.zeros((3, 5), np.float32)
                    futures.append(pool.call(s, stream, "advance_and_partial", chunk))
            finals = [
                pool.call(s, st, "finalize") for s, st in zip((0, 2, 4), streams, strict=True)
            ]
            child.call_many = counted  # type: ignore[method-assign]
            hold.set()
            await busy
            partials = await asyncio.gather(*futures, return_exceptions=True)
            ends = await asyncio.gather(*finals, return_exceptions=True)
        finally:
            child.call_many = call_many  # type: ignore[method-assign]
            pool.close()
        by_stream = [[getattr(p, "text", "error") for p in partials[k::3]] for k in range(3)]
        bad = next((e for e in partials if isinstance(e, BaseException)), None)
        return by_stream, list(ends), bad

    by_stream, finals, bad = asyncio.run(run())
    assert messages and max(messages) > 3, messages  # several streams' calls in a message
    assert isinstance(bad, ValueError) and "log_probs" in str(bad)
    assert by_stream[1][2] == "error" and "error" not in by_stream[0] + by_stream[2]
    for k in (0, 2):  # the good streams, against decoding alone
        lp, mine = _log_probs(10 + k), local.start()
        alone: list[str] = []
        for i in range(0, 120, 24):
            mine.advance(lp[i : i + 24])
            alone.append(mine.partial().text)
        assert by_stream[k] == alone
        assert [h.text for h in finals[k]] == [h.text for h in mine.finalize()]  # type: ignore[attr-defined]
