"""Would a speaker's profile do better choosing the speaker's frequency warp too? (offline
probe)

Usage: python models/results/speaker/warps.py BUNDLE MANIFEST OUT.json [ENROL]

The served first network hears every stream through two warped copies (0.8 and 1.0),
averaged evenly: a choice made for all the dev voices at once. A minute of one voice could
choose that voice's own warp (VTLN, per speaker, not per 2 s). Per voice, the first ENROL
utterances fit the served profile (entropy, 10 steps) under each of the warps 0.7-1.1; every
later utterance is scored through the profile under:
- "served": the two served copies averaged (what `adapt_speaker` serves);
- "warp a": one copy, warped by a, alone;
- "chosen": the one warp (of 0.7-1.1) whose profiled copy has the lowest mean speech entropy
  over the enrolment (a rule a stream could apply);
- "chosen pair": the two adjacent warps of lowest summed entropy, averaged;
- "best": each voice's best single warp by its later utterances' beam errors (an oracle, the
  ceiling of the choice).
The pair's other network hears every utterance as served.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from evaluation.variants import beam_texts
from models.input_adaptation import AdaptConfig, fit_transforms, speech_entropy
from models.mixing import mix_numpy
from models.results.adapt.probe import F32, others_served
from models.results.speaker.probe import by_voice, features, frozen_first, out, report, scored
from models.warp import warp_features

WARPS = (0.7, 0.8, 0.9, 1.0, 1.1)
PROFILE = AdaptConfig(steps=10, rate=0.05, max_seconds=60, piece_seconds=5)
SERVED = (0.8, 1.0)


def main() -> None:
    bundle, manifest, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    enrol_n = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    nets, first, _ = frozen_first(bundle)
    fcfg = first.config.features
    names = ["served", *(f"warp {a}" for a in WARPS), "chosen", "chosen pair"]
    variants: dict[str, list[F32]] = {n: [] for n in names}
    refs: list[str] = []
    voices: list[str | None] = []
    picks: dict[str, object] = {}
    t0 = time.time()
    for voice, utts in by_voice(manifest).items():
        enrol = [features(u.audio, first) for u in utts[:enrol_n]]
        profile = fit_transforms(first, torch.cat(enrol).numpy(), WARPS, PROFILE)
        entropy = []
        for k, a in enumerate(WARPS):
            outs = [
                torch.from_numpy(out(first, profile.apply(warp_features(e, a, fcfg), k)))
                for e in enrol
            ]
            ent = [speech_entropy(o[None])[0][0] for o in outs]
            entropy.append(float(torch.stack(ent).mean()))
        chosen = int(np.argmin(entropy))
        adjacent = int(np.argmin([entropy[i] + entropy[i + 1] for i in range(len(WARPS) - 1)]))
        picks[str(voice)] = {
            "enrolment_entropy": dict(zip(map(str, WARPS), entropy, strict=True)),
            "chosen": WARPS[chosen],
            "chosen_pair": WARPS[adjacent : adjacent + 2],
        }
        print(f"{voice}: {picks[str(voice)]} ({time.time() - t0:.0f} s)", flush=True)
        for u in utts[enrol_n:]:
            feats = features(u.audio, first)
            others = others_served(nets, feats[None])
            copies = [
                out(first, profile.apply(warp_features(feats, a, fcfg), k))
                for k, a in enumerate(WARPS)
            ]

            def pair(first_out: F32, others: list[F32] = others) -> F32:
                return mix_numpy([first_out, *others], nets.weights)

            served = [copies[WARPS.index(a)] for a in SERVED]
            variants["served"].append(pair(mix_numpy(served, [0.5, 0.5])))
            for k, a in enumerate(WARPS):
                variants[f"warp {a}"].append(pair(copies[k]))
            variants["chosen"].append(pair(copies[chosen]))
            variants["chosen pair"].append(
                pair(mix_numpy(copies[adjacent : adjacent + 2], [0.5, 0.5]))
            )
            refs.append(u.text)
            voices.append(voice)
    print(f"{len(refs)} utterances scored, {time.time() - t0:.0f} s", flush=True)
    rows = scored(bundle, first, refs, variants)
    # the oracle: per voice, the single warp with the fewest beam errors on its later utterances

    decoder = load_decoder(
        bundle, Alphabet.from_list(first.config.alphabet), first.config.frame_seconds
    )
    per_voice: dict[str, dict[str, float]] = {}
    for name in variants:
        hyps = beam_texts(decoder, variants[name])
        for v in dict.fromkeys(voices):
            pairs = [(r, h) for r, h, w in zip(refs, hyps, voices, strict=True) if w == v]
            per_voice.setdefault(str(v), {})[name] = wer(pairs).rate
    print(json.dumps(per_voice, indent=1), flush=True)
    fields = {"enrol_utterances": enrol_n, "warps": WARPS, "picks": picks}
    report(dest, bundle, manifest, refs, rows, **fields, per_voice_beam_wer=per_voice)


if __name__ == "__main__":
    main()
