"""Does a stream's transcript depend on the streams batched beside it? int8's dynamically
quantized GRU scales activations once per call (models/quantize.py), so it may; fp32 should
not, beyond float rounding. Each utterance is heard alone and in a padded batch with seven
others (seeded), whole-utterance forward, and both are decoded by the bundle's beam search.

    .venv/bin/python experiments/int8_batchmates/probe.py [BUNDLE] [MANIFEST] [N]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from models.ensemble import load_networks
from models.features import featurize
from models.manifest import read_manifest
from training.data import load_audio

bundle = Path(sys.argv[1] if len(sys.argv) > 1 else "models/default")
manifest = Path(sys.argv[2] if len(sys.argv) > 2 else "data/corpus/dev.jsonl")
n = int(sys.argv[3]) if len(sys.argv) > 3 else 120
torch.set_num_threads(1)
utts = read_manifest(manifest)[:n]
rng = random.Random(0)
mates = [rng.sample([j for j in range(n) if j != i], 7) for i in range(n)]

for dtype in ("int8", "fp32"):
    model = load_networks(bundle, dtype=torch.float32 if dtype == "fp32" else dtype)
    feats = [
        torch.from_numpy(featurize(load_audio(str(u.audio)), model.config.features)) for u in utts
    ]
    alone, batched, gap = [], [], []
    with torch.inference_mode():
        for i in range(n):
            lp, ln = model.forward(feats[i][None], torch.tensor([feats[i].shape[0]]))
            a = lp[0, : int(ln[0])].float().numpy()
            group = [feats[i]] + [feats[j] for j in mates[i]]
            lengths = torch.tensor([f.shape[0] for f in group])
            x = torch.nn.utils.rnn.pad_sequence(group, batch_first=True)
            lp, ln = model.forward(x, lengths)
            b = lp[0, : int(ln[0])].float().numpy()
            alone.append(a)
            batched.append(b)
            gap.append(float(np.abs(np.exp(a) - np.exp(b)).max()))
    decoder = load_decoder(
        bundle, Alphabet.from_list(model.config.alphabet), model.config.frame_seconds
    )
    ta = [decoder.decode(a)[0].text for a in alone]
    tb = [decoder.decode(b)[0].text for b in batched]
    refs = [u.text for u in utts]
    differ = sum(x != y for x, y in zip(ta, tb, strict=True))
    print(
        f"{dtype}: {n} utterances; transcripts that differ alone vs batched: {differ}; "
        f"largest per-frame probability gap median {np.median(gap):.4f}, max {max(gap):.4f}; "
        f"beam WER alone {wer(zip(refs, ta, strict=True)).rate:.4f}, batched {wer(zip(refs, tb, strict=True)).rate:.4f}",
        flush=True,
    )
