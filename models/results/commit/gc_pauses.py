"""Where the decoder's rare slow chunks come from: garbage collection pauses (commit.md).

Usage: python models/results/commit/gc_pauses.py plain|freeze

Runs models/default's networks (int8, as served on a CPU without AMX) over TTS dev, then
decodes every utterance in 5-frame chunks (advance + partial, as a server stream does) at
commit_s 0.75 and 1.0, twice each, timing every chunk and every collection the garbage
collector makes. `freeze` first moves every object alive (torch, numba, the LM) out of the
collector's reach, as the server now does once it has started.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import numpy as np

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.model_outputs import manifest_log_probs

outs = manifest_log_probs(Path("models/default"), Path("data/corpus/dev.jsonl"), dtype="int8")
outputs = outs.log_probs
alphabet = Alphabet.from_list(outs.config.alphabet)
pauses: list[tuple[int, float]] = []
started = [0.0]


def timed(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        pauses.append((info["generation"], (time.perf_counter() - started[0]) * 1e3))


gc.callbacks.append(timed)
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
if mode == "freeze":
    gc.collect()
    gc.freeze()
for commit in (0.75, 1.0, 0.75, 1.0):
    pauses.clear()
    decoder = load_decoder(
        Path("models/default"), alphabet, outs.config.frame_seconds, commit_s=commit
    )
    chunks = []
    for probs in outputs:
        stream = decoder.start()
        for i in range(0, len(probs), 5):
            t = time.perf_counter()
            stream.advance(probs[i : i + 5])
            stream.partial()
            chunks.append((time.perf_counter() - t) * 1e3)
        t0 = time.perf_counter()
        stream.finalize()
        chunks.append((time.perf_counter() - t0) * 1e3)
    ms = np.array(chunks)
    full = [p for g, p in pauses if g == 2]
    print(
        f"{mode} commit {commit}: {len(ms)} calls, p50 {np.median(ms):.2f} ms, "
        f"over 20 ms {(ms > 20).sum()}, slowest {ms.max():.1f} ms; collections {len(pauses)}, "
        f"full ones {len(full)}, slowest full {max(full, default=0):.1f} ms"
    )
