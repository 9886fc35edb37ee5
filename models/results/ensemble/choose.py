"""Could each stream pick its first network, as it picks its warp? (an offline probe)

Usage: python models/results/ensemble/choose.py BUNDLE MANIFEST OUT.json CANDIDATE_BUNDLE...

The students of the last stages each read one dev set better and the other worse: soft_w5 and
the formant stage the TTS voices, the shipped first network her prompts. If different voices
suit different networks, a stream could run every candidate for its first frames and keep the
most confident, as `models/warp.py` keeps the most confident warp. Each candidate (BUNDLE's
first network, then each CANDIDATE_BUNDLE's network) runs on the first network's warps,
averaged, and is mixed with BUNDLE's other networks at BUNDLE's weights. Per utterance, this
reports: every candidate alone, the one whose mixed output has the lowest mean entropy over
speech frames (the whole utterance: an upper bound for a choice made early), and the oracle
(the lowest greedy error), as greedy CER and, except for the oracle, beam WER with BUNDLE's
search.
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
from evaluation.variants import beam_texts
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.manifest import read_manifest
from models.metrics import greedy_decode
from models.warp import BLANK, SPEECH_PROB, adapted_forward, frame_entropy, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]


def speech_entropy(log_probs: F32) -> float:
    """Mean entropy over frames where a character is likelier than SPEECH_PROB (all if none)."""
    speech = 1.0 - np.exp(log_probs[:, BLANK].astype(np.float64)) > SPEECH_PROB
    h = frame_entropy(log_probs)
    return float(h[speech].mean() if speech.any() else h.mean())


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    first = nets.models[0]
    fcfg = first.config.features
    candidates = [first, *(load_networks(p, ensemble=False).models[0] for p in sys.argv[4:])]
    names = [str(bundle), *sys.argv[4:]]
    factors = first.config.warp_factors or (1.0,)
    utts = read_manifest(manifest)
    mixed: list[list[F32]] = []  # per utterance, per candidate
    t0 = time.time()
    with torch.inference_mode():
        for utt in utts:
            feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), fcfg))[None]
            n = torch.tensor([feats.shape[1]])
            others = [adapted_forward(m, feats, n)[0][0].float().numpy() for m in nets.models[1:]]
            per_candidate = []
            for model in candidates:
                copies = []
                for a in factors:
                    lp, m = model(warp_features(feats, a, fcfg), n)
                    copies.append(lp[0, : int(m[0])].float().numpy())
                own = mix_numpy(copies, [1.0 / len(copies)] * len(copies))
                per_candidate.append(mix_numpy([own, *others], nets.weights))
            mixed.append(per_candidate)
    print(f"networks: {time.time() - t0:.0f} s for {len(utts)} utterances", flush=True)
    cfg = first.config
    refs = [u.text for u in utts]
    greedy = [[greedy_decode(o, cfg.alphabet) for o in outs] for outs in mixed]
    char_errors = np.array(
        [[cer([(r, h)]).errors for h in hs] for r, hs in zip(refs, greedy, strict=True)]
    )
    entropy = np.array([[speech_entropy(o) for o in outs] for outs in mixed])
    picks = {
        **{f"candidate {i}": np.full(len(utts), i) for i in range(len(candidates))},
        "lowest entropy": entropy.argmin(1),
        "oracle (greedy)": char_errors.argmin(1),
    }
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    words = np.array([len(r.split()) for r in refs])
    rows: dict[str, dict[str, object]] = {}
    errors: dict[str, npt.NDArray[np.int64]] = {}
    for name, pick in picks.items():
        outs = [mixed[u][int(c)] for u, c in enumerate(pick)]
        hyps_g = [greedy[u][int(c)] for u, c in enumerate(pick)]
        row: dict[str, object] = {
            "greedy_cer": cer(zip(refs, hyps_g, strict=True)).rate,
            "chosen": np.bincount(pick, minlength=len(candidates)).tolist(),
        }
        if not name.startswith("oracle"):
            hyps = beam_texts(decoder, outs)
            errors[name] = np.array([wer([(r, h)]).errors for r, h in zip(refs, hyps, strict=True)])
            row["beam_wer"] = wer(zip(refs, hyps, strict=True)).rate
            if name != "candidate 0":
                low, high, p_worse = paired_bootstrap(errors["candidate 0"], errors[name], words)
                row |= {"vs_shipped_low": low, "vs_shipped_high": high, "p_worse": p_worse}
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    result = {"bundle": str(bundle), "candidates": names, "manifest": str(manifest), "rows": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
