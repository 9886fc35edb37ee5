"""Where a stream's chunk can stall in the search, and what a shared LM cache is worth
(decoder/results/stalls.md).

Usage: python decoder/results/stalls.py chunks|cache [BUNDLE [MANIFEST [LM_DIR ...]]]

Runs BUNDLE's networks (int8, as a CPU without AMX serves them) over MANIFEST once, then
decodes every utterance in 5-frame chunks (advance + partial, as a server stream does) with
one decoder per pass, as one long-running decoder process would, and times every chunk and
every finalize().

- `chunks`: the code as it stands, at commit_s 0.75 and 1.0, two passes each: chunk-time
  percentiles, the slow chunks (over 15 ms: utterance, frame, beams, tree size after).
- `cache`: each LM directory's decoder.json (default: the bundle's own), the KenLM as harken
  now queries it against the same behind the cache harken had until this measurement (a dict
  of (state, token) -> result shared by every stream, emptied whole at 2**20 entries);
  passes alternate, twice each: total time, chunk percentiles, the cache's entries and hit
  rate, and how much the process's resident memory grew.
"""

from __future__ import annotations

import copy
import gc
import os
import platform
import sys
import time
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.lm import KenLM, Unit
from decoder.loading import load_decoder
from evaluation.model_outputs import manifest_log_probs
from server.memory import settle_heap

OLD_CACHE_ENTRIES = 1 << 20


class SharedCache:
    """The cross-stream cache harken's KenLM held before (same policy, same key)."""

    def __init__(self, lm: KenLM):
        self.lm = lm
        self.cache: dict[tuple[Hashable, str], tuple[float, Hashable, bool]] = {}
        self.hits = self.misses = 0

    @property
    def unit(self) -> Unit:
        return self.lm.unit

    def begin(self) -> Hashable:
        return self.lm.begin()

    def finish(self, state: Hashable) -> float:
        return self.lm.finish(state)

    def score(self, state: Hashable, token: str) -> tuple[float, Hashable, bool]:
        key = (state, token)
        hit = self.cache.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        result = self.lm.score(state, token)
        if len(self.cache) >= OLD_CACHE_ENTRIES:
            self.cache.clear()
        self.cache[key] = result
        return result


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def decode_timed(
    decoder: BeamSearchDecoder, probs: npt.NDArray[np.float32]
) -> tuple[list[tuple[float, int, int]], float]:
    """One utterance in 5-frame chunks: (ms, beams, tree nodes) after each chunk, and the
    finalize() ms."""
    stream, chunks = decoder.start(), []
    for i in range(0, len(probs), 5):
        t = time.perf_counter()
        stream.advance(probs[i : i + 5])
        stream.partial()
        chunks.append(((time.perf_counter() - t) * 1e3, len(stream.beams.nodes), stream.tree.size))
    t = time.perf_counter()
    stream.finalize()
    return chunks, (time.perf_counter() - t) * 1e3


def one_pass(
    decoder: BeamSearchDecoder, outputs: list[npt.NDArray[np.float32]]
) -> tuple[float, npt.NDArray[np.float64]]:
    chunks = []
    start = time.perf_counter()
    for probs in outputs:
        chunks += [ms for ms, _, _ in decode_timed(decoder, probs)[0]]
    return time.perf_counter() - start, np.array(chunks)


def chunk_times(
    bundle: Path, alphabet: Alphabet, frame_seconds: float, outputs: list[npt.NDArray[np.float32]]
) -> None:
    for rep in range(2):
        for commit in (0.75, 1.0):
            decoder = load_decoder(bundle, alphabet, frame_seconds, commit_s=commit)
            chunks, finals, slow = [], [], []
            for k, probs in enumerate(outputs):
                timed, final_ms = decode_timed(decoder, probs)
                finals.append(final_ms)
                for n, (ms, beams, nodes) in enumerate(timed):
                    chunks.append(ms)
                    if ms > 15:
                        slow.append(f"{k}@{5 * n} {ms:.0f} ms ({beams} beams, {nodes} nodes)")
            c, f = np.array(chunks), np.array(finals)
            print(
                f"pass {rep + 1}, commit_s {commit}: chunk p50 {np.median(c):.3f} "
                f"p99.9 {np.percentile(c, 99.9):.1f} max {c.max():.1f} ms, over 15 ms "
                f"{len(slow)} of {len(c)}; finalize p50 {np.median(f):.2f} p98 "
                f"{np.percentile(f, 98):.2f} max {f.max():.1f} ms",
                flush=True,
            )
            if slow:
                print("  slow: " + "; ".join(slow), flush=True)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "chunks"
    if mode not in ("chunks", "cache"):
        raise SystemExit(__doc__)
    bundle = Path(sys.argv[2] if len(sys.argv) > 2 else "models/default")
    manifest = Path(sys.argv[3] if len(sys.argv) > 3 else "data/corpus/dev.jsonl")
    lm_dirs = [Path(p) for p in sys.argv[4:]] or [bundle]
    torch.set_num_threads(1)
    outs = manifest_log_probs(bundle, manifest, dtype="int8")
    outputs = outs.log_probs
    alphabet = Alphabet.from_list(outs.config.alphabet)
    settle_heap()  # as the server does once started
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}; {bundle}, {len(outputs)} utterances of {manifest}, "
        f"{sum(len(o) for o in outputs)} frames; one thread",
        flush=True,
    )
    if mode == "chunks":
        chunk_times(bundle, alphabet, outs.config.frame_seconds, outputs)
        return
    for lm_dir in lm_dirs:
        for rep in range(2):
            for lm_mode in ("now", "shared cache"):
                decoder = load_decoder(lm_dir, alphabet, outs.config.frame_seconds)
                lm = decoder.lm
                assert isinstance(lm, KenLM), f"{lm_dir}: no KenLM"
                cached = None
                if lm_mode == "shared cache":
                    decoder = copy.copy(decoder)
                    cached = SharedCache(lm)
                    decoder.lm = cached
                gc.collect()
                before = rss_mb()
                total, ms = one_pass(decoder, outputs)
                grew = rss_mb() - before
                cache = (
                    f"cache {len(cached.cache)} entries, hit rate "
                    f"{cached.hits / max(1, cached.hits + cached.misses):.1%}"
                    if cached
                    else "no cache"
                )
                print(
                    f"{lm_dir} ({lm.unit} LM) pass {rep + 1} {lm_mode}: total {total:.2f} s; "
                    f"chunk p50 {np.median(ms):.3f} p99 {np.percentile(ms, 99):.2f} "
                    f"max {ms.max():.1f} ms; over 20 ms {(ms > 20).sum()} of {len(ms)}; "
                    f"{cache}; resident memory +{grew:.0f} MB",
                    flush=True,
                )
                del decoder, cached


if __name__ == "__main__":
    main()
