"""Would a file's adaptation gain more from adapting the wide network too, or from more steps?
(offline probe, on what the server serves for files)

Usage: python models/results/adapt_served/both.py BUNDLE MANIFEST OUT.json [LIMIT]

Variants of the pair's output per utterance, scored against the files' option as served
(the first network adapted, 5 steps at 0.05; the wide network as it is):
- "plain": no adaptation (the live server);
- "first s10": the first network fitted with 10 steps;
- "both": the wide network adapted the same way as well (each warped copy as is and through
  its own fitted transform, averaged), at its share of the mix.
The wide network's fit costs about twice the first's (twice the parameters).
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
from models.ds2 import DS2
from models.ensemble import load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputTransforms, fit_transforms
from models.manifest import read_manifest
from models.mixing import mix_numpy
from models.warp import adapted_forward
from training.data import load_audio

F32 = npt.NDArray[np.float32]


def heard(model: DS2, x: torch.Tensor, fitted: InputTransforms | None) -> F32:
    """One network's served output [T', V] of feats [1, T, F], adapted or not."""
    n = torch.tensor([x.shape[1]])
    with torch.inference_mode():
        lp, m = adapted_forward(model, x, n, [fitted] if fitted else None)
    return np.asarray(lp[0, : int(m[0])].float().numpy(), np.float32)


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    nets = load_networks(bundle)
    first, wide = nets.models
    for m in nets.models:
        for p in m.parameters():
            p.requires_grad_(False)
    utts = read_manifest(manifest)
    if limit:
        pick = np.random.default_rng(0).choice(len(utts), limit, replace=False)
        utts = [utts[i] for i in sorted(pick)]
    names = ("plain", "served", "first s10", "both")
    variants: dict[str, list[F32]] = {k: [] for k in names}
    t0 = time.time()
    for utt in utts:
        feats = featurize(load_audio(str(utt.audio)), first.config.features)
        x = torch.from_numpy(feats)[None]
        t_first = fit_transforms(first, feats, first.config.warp_factors)
        t_s10 = fit_transforms(first, feats, first.config.warp_factors, AdaptConfig(steps=10))
        t_wide = fit_transforms(wide, feats, wide.config.warp_factors)
        w_plain = heard(wide, x, None)
        outs = {
            "plain": [heard(first, x, None), w_plain],
            "served": [heard(first, x, t_first), w_plain],
            "first s10": [heard(first, x, t_s10), w_plain],
            "both": [heard(first, x, t_first), heard(wide, x, t_wide)],
        }
        for name, pair in outs.items():
            variants[name].append(mix_numpy(pair, nets.weights))
    print(f"{len(utts)} utterances in {time.time() - t0:.0f} s", flush=True)
    cfg = first.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    refs = [u.text for u in utts]
    rows = score_variants(decoder, cfg.alphabet, refs, variants, "served")
    result = {
        "bundle": str(bundle),
        "manifest": str(manifest),
        "utterances": len(utts),
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
