"""Should the pair's second network learn the speaker too? (offline probe)

Usage: python models/results/speaker/both.py BUNDLE MANIFEST OUT.json [ENROL]

As served, a stream's profile is fitted on and heard by the bundle's first network only; the
wide second network hears the stream as it is. Here each voice's first 16 utterances (about a
minute) are the enrolment and the rest are scored three ways: "served" (no profile), "first"
(the first network through its profile, as `adapt_speaker` serves), "both" (each network
through a profile of its own, fitted the same way on the same audio).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from models.input_adaptation import InputTransforms, ProfileSchedule, fit_transforms
from models.mixing import mix_numpy
from models.results.adapt.probe import F32
from models.results.speaker.probe import by_voice, features, frozen_first, report, scored
from models.warp import adapted_forward

ENROL = 16


def heard(model: torch.nn.Module, feats: torch.Tensor, profile: InputTransforms | None) -> F32:
    """A network's served output for raw frames [T, F] (its warps), through `profile`."""
    n = torch.tensor([feats.shape[0]])
    profiles = [profile] if profile is not None else None
    with torch.no_grad():
        lp = adapted_forward(model, feats[None], n, profiles=profiles)[0][0]  # type: ignore[arg-type]
    out: F32 = lp.float().numpy()
    return out


def main() -> None:
    bundle, manifest, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    enrol = int(sys.argv[4]) if len(sys.argv) > 4 else ENROL
    nets, first, _ = frozen_first(bundle)
    for m in nets.models[1:]:
        for p in m.parameters():
            p.requires_grad_(False)
    fit = ProfileSchedule().fit
    variants: dict[str, list[F32]] = {"served": [], "first": [], "both": []}
    refs: list[str] = []
    t0 = time.time()
    for voice, utts in by_voice(manifest).items():
        pooled = torch.cat([features(u.audio, first) for u in utts[:enrol]]).numpy()
        profiles = [fit_transforms(m, pooled, m.config.warp_factors, fit) for m in nets.models]
        print(f"{voice}: profiles fitted at {time.time() - t0:.0f} s", flush=True)
        for u in utts[enrol:]:
            feats = features(u.audio, first)
            plain = [heard(m, feats, None) for m in nets.models]
            own = [heard(m, feats, p) for m, p in zip(nets.models, profiles, strict=True)]
            variants["served"].append(mix_numpy(plain, nets.weights))
            variants["first"].append(mix_numpy([own[0], *plain[1:]], nets.weights))
            variants["both"].append(mix_numpy(own, nets.weights))
            refs.append(u.text)
    print(f"{len(refs)} utterances scored, {time.time() - t0:.0f} s", flush=True)
    rows = scored(bundle, first, refs, variants)
    report(dest, bundle, manifest, refs, rows, enrol_utterances=enrol)


if __name__ == "__main__":
    main()
