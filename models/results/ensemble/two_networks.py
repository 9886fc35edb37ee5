"""Would serving two networks and averaging their outputs beat either? (an offline probe)

Usage: python models/results/ensemble/two_networks.py A B MANIFEST OUT.json [WEIGHT ...]

A and B are scoreable bundles with the same output frame rate and alphabet (a 768-wide
mid-way export made scoreable by `models/results/wide768/midway.py`, beside models/default).
Each network hears every utterance as the server would (`manifest_log_probs`: CPU, fp32,
its own speaker warps); the merges are per-frame mean probabilities with B weighted
w (0 is A alone, 1 is B alone), decoded with A's decoder (LM and settings). Prints greedy
CER and beam WER per weight, each merge's paired bootstrap against A, and writes OUT.json.
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
from decoder.metrics import cer, wer
from evaluation.compare import paired_bootstrap
from evaluation.model_outputs import manifest_log_probs
from models.ensemble import mix_numpy
from models.metrics import greedy_decode

F32 = npt.NDArray[np.float32]


def mix(a: F32, b: F32, w: float) -> F32:
    """log((1 - w) p_a + w p_b) per frame (`models.ensemble`'s mix, as served)."""
    if w <= 0.0:
        return a
    if w >= 1.0:
        return b
    t = min(len(a), len(b))  # equal for bundles of one frame rate
    return mix_numpy([a[:t], b[:t]], [1.0 - w, w])


def main() -> None:
    path_a, path_b, manifest, out = (Path(a) for a in sys.argv[1:5])
    weights = [float(w) for w in sys.argv[5:]] or [0.0, 0.3, 0.5, 0.7, 1.0]
    torch.set_num_threads(1)
    t0 = time.time()
    heard_a = manifest_log_probs(path_a, manifest)  # each as served: its own warps chosen
    heard_b = manifest_log_probs(path_b, manifest)
    ca, cb = heard_a.config, heard_b.config
    if ca.alphabet != cb.alphabet or ca.frame_seconds != cb.frame_seconds:
        raise SystemExit("the two bundles must share their alphabet and output frame rate")
    print(f"networks: {time.time() - t0:.0f} s for {len(heard_a.references)} utterances")
    decoder = load_decoder(path_a, Alphabet.from_list(ca.alphabet), ca.frame_seconds)
    outs = list(zip(heard_a.log_probs, heard_b.log_probs, strict=True))
    refs = heard_a.references
    words = np.array([len(r.split()) for r in refs])
    rows: dict[str, dict[str, float]] = {}
    base: npt.NDArray[np.int64] | None = None
    for w in weights:
        merged = [mix(x, y, w) for x, y in outs]
        g = [greedy_decode(m, ca.alphabet) for m in merged]
        hyps = [decoder.decode(m)[0].text for m in merged]
        errors = np.array([wer([(r, h)]).errors for r, h in zip(refs, hyps, strict=True)])
        row = {
            "greedy_cer": cer(zip(refs, g, strict=True)).rate,
            "beam_wer": wer(zip(refs, hyps, strict=True)).rate,
            "beam_cer": cer(zip(refs, hyps, strict=True)).rate,
        }
        if base is None:
            base = errors
        else:
            low, high, p_worse = paired_bootstrap(base, errors, words)
            row |= {"beam_wer_vs_first_low": low, "beam_wer_vs_first_high": high}
            row["p_worse"] = p_worse
        rows[f"{w:g}"] = row
        print(
            f"w {w:<4g} greedy CER {row['greedy_cer']:.2%}  beam WER {row['beam_wer']:.2%}"
            + (
                f"  vs w={weights[0]:g}: {row['beam_wer_vs_first_low']:+.2%} to "
                f"{row['beam_wer_vs_first_high']:+.2%}"
                if "p_worse" in row
                else ""
            ),
            flush=True,
        )
    result = {"a": str(path_a), "b": str(path_b), "manifest": str(manifest), "weights": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
