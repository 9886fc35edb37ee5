"""The pair as served, its first network's part mixed with probe.py's adapted outputs.

Usage: python models/results/adapt/pair.py BUNDLE MANIFEST PROBE.npz VARIANT SHARES OUT.json

probe.py saves every variant's first-network outputs (PROBE.npz, beside its OUT.json). Here
the first network's part of the pair becomes (1 - s) x its unadapted copies + s x VARIANT's
adapted ones, for each s in SHARES (comma-separated; 0 is the pair as served), then joins the
other networks at the bundle's weights; scored as probe.py scores, against s = 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.variants import score_variants
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.manifest import read_manifest
from models.results.adapt.probe import F32, others_served
from training.data import load_audio


def main() -> None:
    bundle, manifest, npz = Path(sys.argv[1]), Path(sys.argv[2]), np.load(sys.argv[3])
    variant, shares, out = sys.argv[4], [float(s) for s in sys.argv[5].split(",")], sys.argv[6]
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    utts = read_manifest(manifest)
    fcfg = nets.models[0].config.features
    others = [
        others_served(nets, torch.from_numpy(featurize(load_audio(str(u.audio)), fcfg))[None])
        for u in utts
    ]
    plain = [npz[f"served/{i}"] for i in range(len(utts))]
    adapted = [npz[f"{variant}/{i}"] for i in range(len(utts))]

    def first_part(x: F32, y: F32, s: float) -> F32:
        return x if s == 0 else y if s == 1 else mix_numpy([x, y], [1 - s, s])

    variants = {
        f"pair, share {s}": [
            mix_numpy([first_part(x, y, s), *o], nets.weights)
            for x, y, o in zip(plain, adapted, others, strict=True)
        ]
        for s in [0.0, *[s for s in shares if s != 0]]
    }
    cfg = nets.models[0].config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    rows = score_variants(
        decoder, cfg.alphabet, [u.text for u in utts], variants, "pair, share 0.0"
    )
    doc = {"bundle": str(bundle), "manifest": str(manifest), "variant": variant, "rows": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
