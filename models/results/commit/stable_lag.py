"""How long after a word is spoken it becomes `stable` in the partials, by commit_s.

Usage: python models/results/commit/stable_lag.py [MANIFEST ...]

Runs models/default's networks (int8, as served on a CPU without AMX) over each manifest,
then decodes every utterance in 5-frame chunks (a partial after each, as a server stream
sends them) at each commit_s. For each word of the final transcript, the lag is the audio
time of the first partial whose stable text holds it (as the nth word) minus the word's end
(its timing in the final); words never stable before the final count at the utterance's
end. Prints the lag's percentiles and the share stable before the final.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.model_outputs import manifest_log_probs

COMMITS = (0.75, 1.0)
CHUNK = 5

torch.set_num_threads(1)
for manifest in sys.argv[1:] or ["data/corpus/dev.jsonl"]:
    outs = manifest_log_probs(Path("models/default"), Path(manifest), dtype="int8")
    alphabet = Alphabet.from_list(outs.config.alphabet)
    fs = outs.config.frame_seconds
    outputs = outs.log_probs
    for commit in COMMITS:
        decoder = load_decoder(Path("models/default"), alphabet, fs, commit_s=commit)
        lags, early = [], 0
        for probs in outputs:
            stream = decoder.start()
            seen: list[float] = []  # audio time at which the nth word first became stable
            for i in range(0, len(probs), CHUNK):
                stream.advance(probs[i : i + CHUNK])
                now = min(i + CHUNK, len(probs)) * fs
                stable = stream.partial().stable_text.split()
                seen += [now] * (len(stable) - len(seen))
            words = stream.finalize()[0].words
            end = len(probs) * fs
            for k, w in enumerate(words):
                if k < len(seen):
                    early += 1
                lags.append((seen[k] if k < len(seen) else end) - w.end)
        lag = np.array(lags)
        p50, p90, p98 = np.percentile(lag, [50, 90, 98])
        print(
            f"{manifest}, commit_s {commit}: {len(lag)} words, stable before the final "
            f"{early / len(lag):.1%}; lag after the word's end p50 {p50:.2f} s, p90 "
            f"{p90:.2f} s, p98 {p98:.2f} s",
            flush=True,
        )
