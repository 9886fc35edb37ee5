"""One long stream through the shipped search: the prefix tree's size and each chunk's decode
time, with and without compacting the tree (decoder/prefixes.py `compact`).

Usage: python models/results/beam/long_stream.py OUT.json

170 TTS dev utterances' log-probs (models/default, speaker adaptation on) end to end as one
stream of 385 s, fed in 100 ms chunks with a partial after each, as a microphone left open
without endpointing is decoded. One thread; times compare within one run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import decoder.beam
from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.model_outputs import manifest_log_probs
from server.precision import cpu_description

BUNDLE = Path("models/default")


def main(out: Path) -> None:
    torch.set_num_threads(1)
    outputs = manifest_log_probs(BUNDLE, Path("data/corpus/dev.jsonl"), 170)
    lp = np.concatenate(outputs.log_probs)
    alphabet = Alphabet.from_list(outputs.config.alphabet)
    base = load_decoder(BUNDLE, alphabet, outputs.config.frame_seconds)
    rows = []
    for search in ({"beam_width": 192, "score_threshold": 10.0}, {}):
        for compact in (False, True):
            decoder.beam.COMPACT_MIN_NODES = 1 << 16 if compact else 1 << 62
            stream, times = base.with_config(**search).start(), []
            for i in range(0, len(lp), 5):
                start = time.perf_counter()
                stream.advance(lp[i : i + 5])
                stream.partial()
                times.append(time.perf_counter() - start)
            tree = stream.tree
            size_mb = (tree.ints.nbytes + tree.floats.nbytes + tree.kids.nbytes) / 1e6
            text = stream.finalize()[0].text
            quarter = len(times) // 4
            row = {
                "search": search or "shipped decoder.json",
                "compact": compact,
                "nodes_at_end": tree.size,
                "tree_mb_at_end": round(size_mb, 1),
                "ms_per_chunk_first_quarter": round(1000 * float(np.mean(times[:quarter])), 3),
                "ms_per_chunk_last_quarter": round(1000 * float(np.mean(times[-quarter:])), 3),
                "ms_per_chunk_max": round(1000 * max(times), 1),
                "words": len(text.split()),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {
        "cpu": cpu_description(),
        "frames": len(lp),
        "audio_s": round(outputs.audio_seconds, 1),
        "rows": rows,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
