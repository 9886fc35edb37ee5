"""Would each utterance adapting its own input to the network help unheard voices? (offline probe)

Usage: python models/results/adapt/probe.py BUNDLE MANIFEST OUT.json [LIMIT]
(ONLY="in s5 lr.05" in the environment runs that variant alone; runs/adapt_OUT.npz keeps
every output, machine-local, for pair.py)

Test-time adaptation by entropy minimisation (SUTA, Lin et al. 2022: single-utterance
adaptation of a CTC model): a few gradient steps per utterance that make the network surer of
its own non-blank frames, through a small set of parameters only. Here those are a per-bin
scale and shift of the input (a diagonal feature-space transform, 160 numbers: what the
cepstral-mean probe in cmn.md fixed by hand, chosen here by the network's confidence), fitted
as served (`models/input_adaptation.py`, which this probe's own loop became). The first network alone, each of its warped copies
adapted on its own, their outputs averaged as served (warp_merge "mean"). Variants: steps and
rate; scored by greedy CER and beam WER with the bundle's search (the first network's own
settings are not separate here: the bundle's decoder.json), paired against no adaptation.
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
from decoder.metrics import cer
from evaluation.variants import score_variants
from models.ds2 import DS2
from models.ensemble import Networks, load_networks, mix_numpy
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputTransforms, fit_transforms
from models.manifest import read_manifest
from models.metrics import greedy_decode
from models.warp import adapted_forward, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]
# name: (steps, learning rate)
VARIANTS = {
    "in s5 lr.05": (5, 0.05),
    "in s10 lr.05": (10, 0.05),
    "in s2 lr.1": (2, 0.1),  # a cheaper fit, run alone (ONLY)
}


def others_served(nets: Networks, feats: torch.Tensor) -> list[F32]:
    """Each network but the first, as the bundle serves it (its warps, chosen or merged)."""
    n = torch.tensor([feats.shape[1]])
    with torch.inference_mode():
        return [adapted_forward(m, feats, n)[0][0].float().numpy() for m in nets.models[1:]]


def adapt(model: DS2, feats: torch.Tensor, steps: int, lr: float) -> F32:
    """Log-probs [T', V] after `steps` of entropy minimisation over the non-blank frames."""
    return fit(model, feats, steps, lr)[0]


def transformed(model: DS2, feats: torch.Tensor, fitted: InputTransforms) -> F32:
    """Log-probs [T', V] of feats [1, T, F] through a fitted input transform."""
    with torch.no_grad():
        out: torch.Tensor = model(fitted.apply(feats, 0), torch.tensor([feats.shape[1]]))[0][0]
    return np.asarray(out.float().numpy(), np.float32)


def fit(model: DS2, feats: torch.Tensor, steps: int, lr: float) -> tuple[F32, InputTransforms]:
    """`adapt`'s log-probs of feats [1, T, F] and the transform it fitted: the served fit
    (`models/input_adaptation.py`) of this one copy."""
    fitted = fit_transforms(model, feats[0].numpy(), (), AdaptConfig(steps=steps, rate=lr))
    return transformed(model, feats, fitted), fitted


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    first = load_networks(bundle, ensemble=False).models[0]
    first.eval()
    for p in first.parameters():
        p.requires_grad_(False)
    fcfg = first.config.features
    factors = first.config.warp_factors or (1.0,)
    utts = read_manifest(manifest)
    if limit:  # a seeded sample: dev interleaves its voices, so a stride would pick one
        pick = np.random.default_rng(0).choice(len(utts), limit, replace=False)
        utts = [utts[i] for i in sorted(pick)]
    only = os.environ.get("ONLY")
    chosen = {k: v for k, v in VARIANTS.items() if only in (None, k)}
    variants: dict[str, list[F32]] = {"served": [], **{k: [] for k in chosen}}
    t0 = time.time()
    for utt in utts:
        feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), fcfg))[None]
        copies = [warp_features(feats, a, fcfg) for a in factors]
        even = [1.0 / len(copies)] * len(copies)
        with torch.inference_mode():
            plain = [first(c, torch.tensor([c.shape[1]]))[0][0].float().numpy() for c in copies]
        variants["served"].append(mix_numpy(plain, even))
        for name, (steps, lr) in chosen.items():
            outs = [adapt(first, c, steps, lr) for c in copies]
            variants[name].append(mix_numpy(outs, even))
    print(f"{len(utts)} utterances in {time.time() - t0:.0f} s", flush=True)
    np.savez_compressed(
        Path("runs") / f"adapt_{out.stem}.npz",
        **{f"{name}/{i}": o for name, outs in variants.items() for i, o in enumerate(outs)},
    )
    cfg = first.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    refs = [u.text for u in utts]
    rows = score_variants(decoder, cfg.alphabet, refs, variants, "served")
    voices = sorted({u.voice or "" for u in utts})
    by_voice = {}
    for v in voices:
        idx = [i for i, u in enumerate(utts) if (u.voice or "") == v]
        by_voice[v] = {
            name: cer((refs[i], greedy_decode(outs[i], cfg.alphabet)) for i in idx).rate
            for name, outs in variants.items()
        }
        print(v, {k: f"{x:.2%}" for k, x in by_voice[v].items()}, flush=True)
    result = {
        "bundle": str(bundle),
        "manifest": str(manifest),
        "utterances": len(utts),
        "variants": {k: list(v) for k, v in chosen.items()},
        "rows": rows,
        "greedy_cer_by_voice": by_voice,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
