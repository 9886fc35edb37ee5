"""RSS of one decoder process holding N concurrent 40-s streams (TTS dev log-probs joined),
interleaved chunk by chunk as a decoder process serves them (decoder/results/stalls.md).

Usage: python decoder/results/stalls/memory.py N
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.model_outputs import manifest_log_probs


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    n = int(sys.argv[1])
    torch.set_num_threads(1)
    bundle = Path("models/default")
    outs = manifest_log_probs(bundle, Path("data/corpus/dev.jsonl"), dtype="int8")
    alphabet = Alphabet.from_list(outs.config.alphabet)
    joined = np.concatenate(outs.log_probs)
    frames = int(40 / outs.config.frame_seconds)
    inputs = [joined[(i * 997) % (len(joined) - frames) :][:frames] for i in range(n)]
    decoder = load_decoder(bundle, alphabet, outs.config.frame_seconds)
    base, peak = rss_mb(), 0.0
    streams = [decoder.start() for _ in range(n)]
    for i in range(0, frames, 5):
        for stream, lp in zip(streams, inputs, strict=True):
            stream.advance(lp[i : i + 5])
            stream.partial()
        peak = max(peak, rss_mb() - base)
    capacities = [s.tree.capacity for s in streams]
    print(
        f"{n} streams x 40 s: RSS peak +{peak:.0f} MB over the decoder's start, at the end "
        f"+{rss_mb() - base:.0f} MB; tree capacities {min(capacities)}-{max(capacities)}"
    )


if __name__ == "__main__":
    main()
