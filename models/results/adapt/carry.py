"""Can a stream use the input transform before it has read the whole utterance? (offline probe)

Usage: python models/results/adapt/carry.py BUNDLE MANIFEST OUT.json

probe.py adapted each utterance on itself, which only a file can do. A live stream knows
its audio as it comes, so two ways a stream could use the transform, each with `probe.py`'s
5 steps at 0.05 on each warped copy of the first network:
- "prefix": fitted on the utterance's first 2 s (all of it if shorter), then applied to the
  whole utterance (optimistic for those 2 s, which a stream would have read unadapted);
- "previous": fitted on the previous utterance of the same voice, applied to this one, as a
  WebSocket session that carries one speaker over many utterances would (the first
  utterance of each voice has no previous one and reads unadapted).
Each is mixed with the unadapted copies at an even share, and the pair at the bundle's
weights (as `probe.py`'s best reading, "pair adapt 0.5"), against the served pair; "whole"
(fitted on the whole utterance itself) is the file case again, for reference.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.variants import score_variants
from models.ensemble import load_networks, mix_numpy
from models.features import featurize
from models.input_adaptation import InputTransforms
from models.manifest import read_manifest
from models.results.adapt.probe import F32, fit, others_served, transformed
from models.warp import warp_features
from training.data import load_audio

STEPS, LR, PREFIX_FRAMES = 5, 0.05, 200


def main() -> None:
    bundle, manifest, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    first = nets.models[0]
    first.eval()
    for p in first.parameters():
        p.requires_grad_(False)
    fcfg = first.config.features
    factors = first.config.warp_factors or (1.0,)
    even = [1.0 / len(factors)] * len(factors)
    utts = read_manifest(manifest)
    last: dict[str | None, list[InputTransforms]] = {}
    variants: dict[str, list[F32]] = {"served": [], "whole": [], "prefix": [], "previous": []}
    t0 = time.time()
    for utt in utts:
        feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), fcfg))[None]
        n = torch.tensor([feats.shape[1]])
        copies = [warp_features(feats, a, fcfg) for a in factors]
        with torch.inference_mode():
            plain = mix_numpy([first(c, n)[0][0].float().numpy() for c in copies], even)
        others = others_served(nets, feats)

        def pair(first_out: F32, others: list[F32] = others) -> F32:
            return mix_numpy([first_out, *others], nets.weights)

        whole = [fit(first, c, STEPS, LR) for c in copies]
        prefix = [fit(first, c[:, :PREFIX_FRAMES], STEPS, LR)[1] for c in copies]
        variants["served"].append(pair(plain))
        variants["whole"].append(
            pair(mix_numpy([plain, mix_numpy([w[0] for w in whole], even)], [0.5, 0.5]))
        )
        pre = mix_numpy(
            [transformed(first, c, t) for c, t in zip(copies, prefix, strict=True)], even
        )
        variants["prefix"].append(pair(mix_numpy([plain, pre], [0.5, 0.5])))
        before = last.get(utt.voice)
        if before is None:
            variants["previous"].append(pair(plain))
        else:
            prev = mix_numpy(
                [transformed(first, c, t) for c, t in zip(copies, before, strict=True)], even
            )
            variants["previous"].append(pair(mix_numpy([plain, prev], [0.5, 0.5])))
        last[utt.voice] = [w[1] for w in whole]
    print(f"{len(utts)} utterances in {time.time() - t0:.0f} s", flush=True)
    cfg = first.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    rows = score_variants(decoder, cfg.alphabet, [u.text for u in utts], variants, "served")
    result = {
        "bundle": str(bundle),
        "manifest": str(manifest),
        "steps": STEPS,
        "lr": LR,
        "prefix_frames": PREFIX_FRAMES,
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
