"""Does averaging the warped copies' outputs beat choosing one? (an offline probe)

Usage: python models/results/ensemble/ensemble.py BUNDLE MANIFEST OUT.json [FACTOR ...]

Runs the bundle's network once per warp factor over the manifest (CPU, float32, one
utterance at a time) and decodes several merges of the copies with the bundle's decoder
settings: the shipped rule (`models.warp.select`: the most confident copy, fixed after
`warp_decide_frames`), the same rule never fixed, and per-frame averages of the copies'
probabilities. Prints greedy CER and beam WER per merge and writes them to OUT.json.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import cer, wer
from models.bundle import load_bundle
from models.features import featurize
from models.manifest import read_manifest
from models.metrics import greedy_decode
from models.warp import WarpChoice, select, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]


def mean_probs(copies: list[F32]) -> F32:
    """The copies' mean probability per frame, as log-probs."""
    stacked = np.stack([c.astype(np.float64) for c in copies])
    m = stacked.max(axis=0)
    return np.asarray(m + np.log(np.exp(stacked - m).mean(axis=0)), np.float32)


def mean_log_probs(copies: list[F32]) -> F32:
    """The copies' geometric mean, renormalised per frame."""
    m = np.mean([c.astype(np.float64) for c in copies], axis=0)
    top = m.max(axis=1, keepdims=True)
    return np.asarray(m - top - np.log(np.exp(m - top).sum(axis=1, keepdims=True)), np.float32)


def chosen(copies: list[F32], factors: list[float], decide: int) -> F32:
    return select(copies, WarpChoice.start(len(factors), factors), decide)


def _pair_mean(i: int, j: int, copies: list[F32]) -> F32:
    return mean_probs([copies[i], copies[j]])


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    factors = [float(a) for a in sys.argv[4:]] or [0.8, 0.9, 1.0]
    torch.set_num_threads(1)
    model = load_bundle(bundle)
    alphabet = Alphabet.from_list(model.config.alphabet)
    decoder = load_decoder(bundle, alphabet, model.config.frame_seconds)
    utts = read_manifest(manifest)
    per_factor: list[list[F32]] = []  # [utt][factor] -> [T, V]
    t0 = time.time()
    with torch.inference_mode():
        for u in utts:
            feats = torch.from_numpy(featurize(load_audio(str(u.audio)), model.config.features))[
                None
            ]
            stacked = torch.cat([warp_features(feats, a, model.config.features) for a in factors])
            lp, n = model(stacked, torch.tensor([feats.shape[1]] * len(factors)))
            per_factor.append([lp[k, : int(n[k])].float().numpy() for k in range(len(factors))])
    print(f"network: {time.time() - t0:.0f} s for {len(utts)} utterances", flush=True)
    idx = {a: i for i, a in enumerate(factors)}
    pair = [idx[0.8], idx[1.0]]
    decide = model.config.warp_decide_frames
    merges: dict[str, Callable[[list[F32]], F32]] = {
        "shipped: choose 0.8/1.0 (fixed after 2 s)": lambda c: chosen(
            [c[i] for i in pair], [0.8, 1.0], decide
        ),
        "choose 0.8/1.0, never fixed": lambda c: chosen([c[i] for i in pair], [0.8, 1.0], 10**9),
        "1.0 alone": lambda c: c[idx[1.0]],
        "geometric mean of 0.8/1.0": lambda c: mean_log_probs([c[i] for i in pair]),
    }
    for a in factors:
        if a != 1.0:
            merges[f"mean of {a}/1.0"] = functools.partial(_pair_mean, idx[a], idx[1.0])
    if len(factors) > 2:
        merges[f"mean of {'/'.join(map(str, factors))}"] = mean_probs
    refs = [u.text for u in utts]
    results: dict[str, dict[str, float]] = {}
    for name, merge in merges.items():
        merged = [merge(c) for c in per_factor]
        g = [greedy_decode(m, model.config.alphabet) for m in merged]
        b = [decoder.decode(m)[0].text for m in merged]
        row = {
            "greedy_cer": cer(zip(refs, g, strict=True)).rate,
            "beam_wer": wer(zip(refs, b, strict=True)).rate,
            "beam_cer": cer(zip(refs, b, strict=True)).rate,
        }
        results[name] = row
        print(
            f"{name:45s} greedy CER {row['greedy_cer']:.2%}  beam WER {row['beam_wer']:.2%}",
            flush=True,
        )
    out.write_text(
        json.dumps(
            {
                "bundle": str(bundle),
                "manifest": str(manifest),
                "factors": factors,
                "results": results,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
