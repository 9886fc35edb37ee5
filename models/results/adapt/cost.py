"""What the adaptation costs per second of audio (offline probe).

Usage: python models/results/adapt/cost.py BUNDLE MANIFEST THREADS [N]

Times probe.py's 5-step fit on each warped copy of the first network over the first N
utterances (40), against the plain forward pass of the same copies, as real-time factors.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from models.ensemble import load_networks
from models.features import featurize
from models.manifest import read_manifest
from models.results.adapt.probe import fit
from models.warp import warp_features
from training.data import load_audio


def main() -> None:
    bundle, manifest, threads = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    torch.set_num_threads(threads)
    first = load_networks(bundle, ensemble=False).models[0]
    first.eval()
    for p in first.parameters():
        p.requires_grad_(False)
    fcfg = first.config.features
    utts = read_manifest(manifest)[:count]
    audio_s = fit_s = forward_s = 0.0
    for utt in utts:
        audio = load_audio(str(utt.audio))
        audio_s += len(audio) / fcfg.sample_rate
        feats = torch.from_numpy(featurize(audio, fcfg))[None]
        copies = [warp_features(feats, a, fcfg) for a in first.config.warp_factors or (1.0,)]
        t0 = time.perf_counter()
        with torch.inference_mode():
            for c in copies:
                first(c, torch.tensor([c.shape[1]]))
        t1 = time.perf_counter()
        for c in copies:
            fit(first, c, 5, 0.05)
        t2 = time.perf_counter()
        forward_s, fit_s = forward_s + t1 - t0, fit_s + t2 - t1
    print(
        f"{len(utts)} utterances, {audio_s:.1f} s of audio, {threads} thread(s): "
        f"plain forward {forward_s / audio_s:.4f} x real time, "
        f"5-step fit of every copy {fit_s / audio_s:.4f} x real time"
    )


if __name__ == "__main__":
    main()
