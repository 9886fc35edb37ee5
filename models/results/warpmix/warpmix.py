"""Would averaging a network's warped copies beat choosing one? (an offline probe)

Usage: python models/results/warpmix/warpmix.py BUNDLE MANIFEST OUT.json [BLANK_PENALTY ...]
MEAN_FACTORS="0.8,0.9,1;0.8,1" (optional, one list per network) sets the factors whose copies
are averaged (default: each network's own).

The server runs each network of BUNDLE on every warp factor of its speaker adaptation until
`warp_decide_frames` frames of speech are heard, then keeps the most confident copy
(`models/warp.py`). Averaging the copies' per-frame probabilities instead (an ensemble over
inputs) would run every copy for the whole stream: its cost is the factors' count times the
network's. This measures what that would buy: each network of BUNDLE on each of its factors,
then (a) as served (chosen copy, networks mixed at their weights), (b) every copy of each
network averaged, networks mixed at their weights, and, for a bundle of several networks,
(c) one network's copies averaged and the others' chosen, for each network (what averaging
costs only where that network is cheap). Each is decoded with BUNDLE's decoder at each blank
penalty given (default: the bundle's): greedy CER and beam WER, and each variant's paired
bootstrap against (a) at the same penalty.
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
from decoder.loading import load_decoder, read_decoder_json
from decoder.metrics import cer, wer
from evaluation.compare import paired_bootstrap
from evaluation.variants import beam_texts
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.manifest import read_manifest
from models.metrics import greedy_decode
from models.warp import WarpChoice, select, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    cfg = nets.models[0].config
    penalties = [float(p) for p in sys.argv[4:]] or [
        float(read_decoder_json(bundle)["config"].get("blank_penalty", 0.0))
    ]
    spec = os.environ.get("MEAN_FACTORS")
    mean_factors = [
        tuple(float(a) for a in part.split(",")) if spec else (m.config.warp_factors or (1.0,))
        for part, m in zip(
            spec.split(";") if spec else [""] * len(nets.models), nets.models, strict=True
        )
    ]
    utts = read_manifest(manifest)
    # per utterance, per network: (the chosen copy, the copies' mean)
    heard: list[list[tuple[F32, F32]]] = []
    t0 = time.time()
    with torch.inference_mode():
        for utt in utts:
            audio = load_audio(str(utt.audio))
            feats = torch.from_numpy(featurize(audio, cfg.features))[None]
            n = torch.tensor([feats.shape[1]])
            per_net = []
            for model, averaged in zip(nets.models, mean_factors, strict=True):
                factors = model.config.warp_factors or (1.0,)
                copy = {}
                for a in sorted(set(factors) | set(averaged)):
                    lp, m = model(warp_features(feats, a, model.config.features), n)
                    copy[a] = lp[0, : int(m[0])].float().numpy()
                choice = WarpChoice.start(len(factors), factors)
                per_net.append(
                    (
                        select([copy[a] for a in factors], choice, model.config.warp_decide_frames),
                        mix_numpy(
                            [copy[a] for a in averaged], [1.0 / len(averaged)] * len(averaged)
                        ),
                    )
                )
            heard.append(per_net)
    print(f"networks: {time.time() - t0:.0f} s for {len(utts)} utterances", flush=True)
    k = len(nets.models)
    plans = {"served": [0] * k, "averaged": [1] * k}  # per network: 0 chosen, 1 averaged
    if k > 1:
        plans |= {f"averaged {i} only": [int(j == i) for j in range(k)] for i in range(k)}
    variants = {
        name: [
            mix_numpy([net[c] for net, c in zip(u, plan, strict=True)], nets.weights) for u in heard
        ]
        for name, plan in plans.items()
    }
    refs = [u.text for u in utts]
    words = np.array([len(r.split()) for r in refs])
    rows: dict[str, dict[str, float]] = {}
    for penalty in penalties:
        decoder = load_decoder(
            bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds, blank_penalty=penalty
        )
        errors = {}
        for name, outs in variants.items():
            hyps = beam_texts(decoder, outs)
            greedy = [greedy_decode(o, cfg.alphabet) for o in outs]
            errors[name] = np.array([wer([(r, h)]).errors for r, h in zip(refs, hyps, strict=True)])
            rows[f"{name} {penalty:g}"] = {
                "greedy_cer": cer(zip(refs, greedy, strict=True)).rate,
                "beam_wer": wer(zip(refs, hyps, strict=True)).rate,
            }
        for name in variants:
            if name != "served":
                low, high, p_worse = paired_bootstrap(errors["served"], errors[name], words)
                row = rows[f"{name} {penalty:g}"]
                row |= {"vs_served_low": low, "vs_served_high": high, "p_worse": p_worse}
            r = rows[f"{name} {penalty:g}"]
            print(
                f"blank penalty {penalty:g} {name:<17} greedy CER {r['greedy_cer']:.2%}  "
                f"beam WER {r['beam_wer']:.2%}"
                + (
                    f"  vs served {r['vs_served_low']:+.2%} to {r['vs_served_high']:+.2%}"
                    if "p_worse" in r
                    else ""
                ),
                flush=True,
            )
    result = {
        "bundle": str(bundle),
        "manifest": str(manifest),
        "mean_factors": mean_factors,
        "plans": plans,
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
