"""Would fitting several streams' profiles as one batch clear a burst of new speakers sooner?
(offline timing probe)

Usage: python models/results/speaker/batchfit.py BUNDLE MANIFEST

Ten streams that start together fall due for their first fits in the same second, and the one
fit thread takes them one by one (`speaker.md`, "New speakers first"). A first fit (15 s, as
one sequence) over the served network's two warped copies is timed against the same fit over
6, 10 and 20 copies: the shape of 3, 5 and 10 streams' first fits in one batch. One thread, as
the server's fit thread runs.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from models.bundle import load_bundle
from models.features import featurize
from models.input_adaptation import ProfileSchedule, fit_transforms
from models.manifest import read_manifest
from training.data import load_audio

FIRST_FRAMES = 1500  # 15 s of 10 ms frames


def main() -> None:
    bundle, manifest = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    model = load_bundle(bundle).float().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    cfg = model.config.features
    audio = [load_audio(str(u.audio)) for u in read_manifest(manifest)[:6]]
    feats = np.concatenate([featurize(a, cfg) for a in audio])[:FIRST_FRAMES]
    first = ProfileSchedule().config(first=True)
    factors = model.config.warp_factors or (1.0,)
    for streams in (1, 1, 3, 5, 10):  # the first run warms up
        started = time.perf_counter()
        fit_transforms(model, feats, tuple(factors) * streams, first)
        seconds = time.perf_counter() - started
        print(f"{streams} stream(s), {streams * len(factors)} copies: {seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main()
