"""Would averaging per-region-warped copies at test time help unheard voices? (offline probe)

Usage: python models/results/formant/tta.py BUNDLE MANIFEST OUT.json

world_probe.py found that the network is not invariant to each formant region moving by its
own factor, and the formant preset's training invariance faded as the rate fell. The served
bundle already averages its first network over two global warps (0.8, 1.0) and gains 1.2
points of beam WER on TTS dev from it. This asks whether averaging over a few per-region
warps as well (fixed, seeded `formant_matrix` draws, composed with each global warp) buys
more: the first network's copies {0.8, 1.0} x {identity, M_1..M_K} averaged, the other
networks as served, mixed at the bundle's weights. For each K and factor range: greedy CER,
beam WER with the bundle's search, and the paired bootstrap against the served mix. The
cost would be (K + 1) times the first network's steps.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.variants import score_variants
from models.ds2 import DS2
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.manifest import read_manifest
from models.warp import adapted_forward, warp_features
from training.augment import formant_matrix
from training.data import load_audio

F32 = npt.NDArray[np.float32]
RANGES = {"narrow": (0.93, 1.08), "train": (0.85, 1.18)}
K_MAX = 6


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    first = nets.models[0]
    fcfg = first.config.features
    factors = first.config.warp_factors or (1.0,)
    mats = {
        name: [
            torch.from_numpy(formant_matrix(r, np.random.default_rng(1000 + j), fcfg))
            for j in range(K_MAX)
        ]
        for name, r in RANGES.items()
    }
    utts = read_manifest(manifest)
    # per utterance: the others' served mix parts, first network's plain copies, warped copies
    others: list[list[F32]] = []
    plain: list[list[F32]] = []
    warped: dict[str, list[list[list[F32]]]] = {name: [] for name in RANGES}
    t0 = time.time()
    with torch.inference_mode():
        for utt in utts:
            feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), fcfg))[None]
            n = torch.tensor([feats.shape[1]])

            def run(x: torch.Tensor, model: DS2 = first, n: torch.Tensor = n) -> F32:
                lp, m = model(x, n)
                out: F32 = lp[0, : int(m[0])].float().numpy()
                return out

            copies = [warp_features(feats, a, fcfg) for a in factors]
            plain.append([run(c) for c in copies])
            for name in RANGES:
                warped[name].append([[run(c @ mat) for c in copies] for mat in mats[name]])
            others.append(
                [adapted_forward(m, feats, n)[0][0].float().numpy() for m in nets.models[1:]]
            )
    print(f"networks: {time.time() - t0:.0f} s for {len(utts)} utterances", flush=True)

    def mixed(first_copies: list[F32], i: int) -> F32:
        avg = mix_numpy(first_copies, [1.0 / len(first_copies)] * len(first_copies))
        return mix_numpy([avg, *others[i]], nets.weights)

    variants = {"served": [mixed(p, i) for i, p in enumerate(plain)]}
    for name in RANGES:
        for k in (2, 4, K_MAX):
            variants[f"{name} K={k}"] = [
                mixed(p + [c for per in warped[name][i][:k] for c in per], i)
                for i, p in enumerate(plain)
            ]
    cfg = first.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    refs = [u.text for u in utts]
    rows = score_variants(decoder, cfg.alphabet, refs, variants, "served")
    result = {
        "bundle": str(bundle),
        "manifest": str(manifest),
        "ranges": RANGES,
        "seeds": [1000 + j for j in range(K_MAX)],
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
