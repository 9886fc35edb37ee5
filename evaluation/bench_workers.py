"""`harken bench-workers`: decoder workers as threads or as processes, on this machine.

The server decodes off the event loop on a few workers, each stream always on the same one
(server/decoding.py). The beam search's frame loops are compiled and release the GIL, but
its LM lookups and per-frame driving hold it, so processes may decode in parallel where
threads cannot; but every chunk then crosses a pipe. This measures both on the bundle's
real log-probs: S streams, each fed in chunks of `chunk_ms` as a live stream would be, over
W workers, and reports throughput (decoded audio seconds per wall second). Results go to OUT/workers.json and OUT/workers.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evaluation.model_outputs import manifest_log_probs
from models import DEFAULT_BUNDLE
from models.config import ModelConfig
from server.decoding import Decoder, DecoderStream, build_decoder

F32 = npt.NDArray[np.float32]

# One decoder and its streams per process (or one shared by the threads).
_decoder: Decoder | None = None
_streams: dict[int, DecoderStream] = {}


def _init(bundle: str, model: dict[str, Any]) -> None:
    global _decoder
    _decoder = build_decoder(bundle, ModelConfig.from_dict(model))


def _start(stream: int) -> None:
    assert _decoder is not None
    _streams[stream] = _decoder.start()


def _advance(stream: int, log_probs: F32) -> None:
    _streams[stream].advance(log_probs)


def _finalize(stream: int) -> str:
    return _streams.pop(stream).finalize()[0].text


def _pools(kind: str, workers: int, bundle: str, model: dict[str, Any]) -> list[Executor]:
    """`workers` single-worker executors (stream affinity), as threads or processes."""
    if kind == "thread":
        _init(bundle, model)
        return [ThreadPoolExecutor(1) for _ in range(workers)]
    return [
        ProcessPoolExecutor(1, initializer=_init, initargs=(bundle, model)) for _ in range(workers)
    ]


def run(
    kind: str, workers: int, chunks: list[list[F32]], bundle: str, model: dict[str, Any]
) -> dict[str, Any]:
    """Decode every stream's chunks, interleaved as live streams arrive; time it."""
    pools = _pools(kind, workers, bundle, model)
    try:
        for pool in pools:  # warm up: start each worker and its decoder
            pool.submit(_start, -1).result()
            pool.submit(_finalize, -1).result()
        began = time.perf_counter()
        for s in range(len(chunks)):
            pools[s % workers].submit(_start, s)
        waits: list[Future[None]] = []
        for k in range(max(len(c) for c in chunks)):
            for s, stream in enumerate(chunks):
                if k < len(stream):
                    waits.append(pools[s % workers].submit(_advance, s, stream[k]))
        texts = [pools[s % workers].submit(_finalize, s) for s in range(len(chunks))]
        for f in waits:
            f.result()
        for t in texts:
            t.result()
        wall = time.perf_counter() - began
    finally:
        for pool in pools:
            pool.shutdown()
    return {"kind": kind, "workers": workers, "wall_s": wall}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle dir")
    p.add_argument("--manifest", type=Path, required=True, help="utterances to decode")
    p.add_argument("--streams", type=int, default=10, help="concurrent streams")
    p.add_argument("--workers", default="1,2", help="worker counts to try, comma-separated")
    p.add_argument("--chunk-ms", type=int, default=160, help="audio per advance")
    p.add_argument("--repeats", type=int, default=3, help="runs per setting (best is kept)")
    p.add_argument("--out", type=Path, required=True, help="writes workers.json/.md here")


def main(args: argparse.Namespace) -> int:
    outputs = manifest_log_probs(args.bundle, args.manifest, args.streams)
    per_chunk = max(1, round(args.chunk_ms / 1000 / outputs.config.frame_seconds))
    chunks = [
        [lp[i : i + per_chunk] for i in range(0, len(lp), per_chunk)] for lp in outputs.log_probs
    ]
    model = outputs.config.to_dict()
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for kind in ("thread", "process"):
            best = min(
                (run(kind, workers, chunks, str(args.bundle), model) for _ in range(args.repeats)),
                key=lambda r: r["wall_s"],
            )
            best["audio_s_per_s"] = outputs.audio_seconds / best["wall_s"]
            rows.append(best)
            print(_row(best), flush=True)
    meta = {
        "bundle": str(args.bundle),
        "streams": len(chunks),
        "audio_seconds": round(outputs.audio_seconds, 1),
        "chunk_ms": args.chunk_ms,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "workers.json").write_text(json.dumps({"meta": meta, "results": rows}, indent=2))
    (args.out / "workers.md").write_text(_markdown(meta, rows))
    return 0


def _row(r: dict[str, Any]) -> str:
    return f"| {r['kind']} | {r['workers']} | {r['wall_s']:.2f} | {r['audio_s_per_s']:.0f} |"


def _markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        "# Decoder workers: threads or processes",
        "",
        f"{meta['streams']} streams ({meta['audio_seconds']} s of audio) decoded in {meta['chunk_ms']} ms "
        f"chunks, interleaved as live streams arrive, on {meta['machine']}; best of repeats.",
        "",
        "| workers as | workers | wall s | audio s / s |",
        "| --- | --- | --- | --- |",
        *(_row(r) for r in rows),
        "",
    ]
    return "\n".join(lines)
