"""Does a third network, trained differently, add to the served pair? (an offline probe)

Usage: python models/results/ensemble/third.py BUNDLE MANIFEST OUT.json EXTRA_BUNDLE...
WEIGHTS="0.7,0.3,0;0.5,0.25,0.25" (optional): weight sets, one weight per network (the
bundle's own first, then each extra), each summing to 1.

Each of BUNDLE's networks runs as served (its own warps and merge); each extra network runs
on the first network's warps, averaged (how the shipped first network hears). Every weight
set is decoded with BUNDLE's search (greedy CER, beam WER) and paired against the first set.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.variants import score_variants
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.manifest import read_manifest
from models.warp import WarpChoice, select, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    extras = [load_networks(p, ensemble=False).models[0] for p in sys.argv[4:]]
    first = nets.models[0]
    fcfg = first.config.features
    k = len(nets.models) + len(extras)
    spec = os.environ.get("WEIGHTS")
    weight_sets = (
        [[float(w) for w in part.split(",")] for part in spec.split(";")]
        if spec
        else [[*nets.weights, *[0.0] * len(extras)]]
    )
    assert all(len(w) == k and abs(sum(w) - 1) < 1e-6 for w in weight_sets), weight_sets
    utts = read_manifest(manifest)
    heard: list[list[F32]] = []  # per utterance, per network: its served output
    t0 = time.time()
    with torch.inference_mode():
        for utt in utts:
            feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), fcfg))[None]
            n = torch.tensor([feats.shape[1]])
            per_net = []
            for model in [*nets.models, *extras]:
                shipped = model in nets.models
                fs = (model if shipped else first).config.warp_factors or (1.0,)
                merge = model.config.warp_merge if shipped else "mean"
                outs = []
                for a in fs:
                    lp, m = model(warp_features(feats, a, fcfg), n)
                    outs.append(lp[0, : int(m[0])].float().numpy())
                choice = WarpChoice.start(len(fs), fs, merge)
                per_net.append(select(outs, choice, model.config.warp_decide_frames))
            heard.append(per_net)
    print(f"networks: {time.time() - t0:.0f} s for {len(utts)} utterances", flush=True)
    cfg = first.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    refs = [u.text for u in utts]
    variants = {}
    for ws in weight_sets:
        keep = [i for i, w in enumerate(ws) if w > 0]
        variants[",".join(f"{w:g}" for w in ws)] = [
            mix_numpy([u[i] for i in keep], [ws[i] for i in keep]) for u in heard
        ]
    rows = score_variants(decoder, cfg.alphabet, refs, variants, next(iter(variants)))
    result = {
        "bundle": str(bundle),
        "extras": sys.argv[4:],
        "manifest": str(manifest),
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
