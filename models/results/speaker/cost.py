"""What a stream's profile fits cost: one core's seconds for each fit of the schedule
(models/results/speaker.md), on the first network's fp32 copy as the server's fit thread runs
it (one torch thread, as `harken serve` runs by default).

Usage: python models/results/speaker/cost.py BUNDLE DICTATION.wav OUT.json
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import torch

from models.bundle import load_bundle
from models.features import featurize
from models.input_adaptation import InputAdapter, ProfileSchedule
from training.data import load_audio


def main() -> None:
    bundle, wav, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(1)
    model = load_bundle(bundle)
    adapter = InputAdapter(lambda: load_bundle(bundle), model.config.warp_factors)
    feats = featurize(load_audio(str(wav)), model.config.features)
    schedule, hop_s = ProfileSchedule(), model.config.features.hop_ms / 1000
    adapter.fit(feats[:100], schedule.fit)  # loads the copy: once per server, not per fit
    rows = []
    seconds = schedule.first_s
    while True:
        frames = feats[: int(seconds / hop_s)]
        began = time.perf_counter()
        adapter.fit(frames, schedule.fit)
        took = time.perf_counter() - began
        rows.append(
            {"audio_s": seconds, "fit_s": round(took, 2), "of_audio": round(took / seconds, 3)}
        )
        print(rows[-1], flush=True)
        if seconds >= schedule.max_s:
            break
        seconds = min(2 * seconds, schedule.max_s)
    total = sum(r["fit_s"] for r in rows)
    result = {
        "bundle": str(bundle),
        "cpu": platform.processor() or platform.machine(),
        "steps": schedule.fit.steps,
        "fits": rows,
        "total_fit_s": round(total, 2),
        "of_first_minute": round(total / schedule.max_s, 3),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(result)


if __name__ == "__main__":
    main()
