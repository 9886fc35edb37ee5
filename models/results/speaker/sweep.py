"""How much enrolment does a speaker's input profile need, and how many fit steps? (offline probe)

Usage: python models/results/speaker/sweep.py BUNDLE MANIFEST OUT.json [K:STEPS:RATE,...]

`probe.py` found the profile fitted on a voice's first 16 utterances, heard alone (no plain
copy beside it), the best reading. Here every profile is scored on the same utterances (each
voice's after its first 32), fitted on the first K of them (K = 4, 8, 16, 32: about 15, 30,
60 and 120 s) with 10 or 20 steps at 0.05 over up to 120 s. Heard alone, as a live stream
would once its profile is fitted; the pair's other network hears as served.

With a fourth argument, only those profiles (enrolment K, steps, rate, and the pieces' length:
5 s as served by default, 0 for one sequence), with each voice's fit time (two threads): e.g.
how cheap a stream's first fit (K = 4) can be.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from models.input_adaptation import AdaptConfig, InputTransforms, fit_transforms
from models.mixing import mix_numpy
from models.results.adapt.probe import F32, others_served
from models.results.speaker.probe import by_voice, features, frozen_first, out, report, scored
from models.warp import warp_features

ENROL = (4, 8, 16, 32)
STEPS = (10, 20)
RATE, MAX_SECONDS = 0.05, 120


def _spec(k: str, steps: str, rate: str, pieces: str = "5") -> tuple[int, int, float, float]:
    return int(k), int(steps), float(rate), float(pieces)


def _name(k: int, steps: int, rate: float, pieces: float) -> str:
    return f"K{k} s{steps}" + (f" r{rate:g} pieces {pieces:g} s" if pieces else "")


def main() -> None:
    bundle, manifest, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    nets, first, even = frozen_first(bundle)
    fcfg, factors = first.config.features, first.config.warp_factors or (1.0,)
    specs = [(k, s, RATE, 0.0) for k in ENROL for s in STEPS]
    if len(sys.argv) > 4:  # "K:steps:rate[:piece seconds],...", pieces 5 s as served by default
        specs = [_spec(*x.split(":")) for x in sys.argv[4].split(",")]
    names = [_name(*spec) for spec in specs]
    variants: dict[str, list[F32]] = {n: [] for n in ["served", *names]}
    refs: list[str] = []
    seconds: dict[str, list[float]] = {n: [] for n in names}  # each voice's fit, 2 threads
    t0 = time.time()
    for voice, utts in by_voice(manifest).items():
        enrol = [features(u.audio, first) for u in utts[: max(ENROL)]]
        profiles: dict[str, InputTransforms] = {}
        for k, s, rate, pieces in specs:
            pooled = torch.cat(enrol[:k]).numpy()
            fit = AdaptConfig(steps=s, rate=rate, max_seconds=MAX_SECONDS, piece_seconds=pieces)
            started = time.perf_counter()
            profiles[_name(k, s, rate, pieces)] = fit_transforms(first, pooled, factors, fit)
            seconds[_name(k, s, rate, pieces)].append(time.perf_counter() - started)
        print(f"{voice}: profiles fitted at {time.time() - t0:.0f} s", flush=True)
        for u in utts[max(ENROL) :]:
            feats = features(u.audio, first)
            copies = [warp_features(feats, a, fcfg) for a in factors]
            others = others_served(nets, feats[None])

            def pair(first_out: F32, others: list[F32] = others) -> F32:
                return mix_numpy([first_out, *others], nets.weights)

            plain = mix_numpy([out(first, c) for c in copies], even)
            variants["served"].append(pair(plain))
            for name, t in profiles.items():
                heard = [out(first, t.apply(c, k)) for k, c in enumerate(copies)]
                variants[name].append(pair(mix_numpy(heard, even)))
            refs.append(u.text)
    print(f"{len(refs)} utterances scored, {time.time() - t0:.0f} s", flush=True)
    rows = scored(bundle, first, refs, variants)
    fits = {"rate": RATE, "max_seconds": MAX_SECONDS, "fit_seconds_two_threads": seconds}
    report(dest, bundle, manifest, refs, rows, **fits)


if __name__ == "__main__":
    main()
