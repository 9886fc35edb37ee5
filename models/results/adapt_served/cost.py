"""What a file's input adaptation costs as served: `transcribe` through the in-process engine
(the server's own path), each file plain and adapted, side by side in one run.

Usage: python models/results/adapt_served/cost.py MANIFEST OUT.json [FILES] [DTYPE] [STEPS RATE]

Per file the wall time from the whole recording to its final, as a share of its length
(real-time factor), with the server's defaults (one torch thread for the steps; the fit runs on
its own thread beside them). The first of each kind is a warm-up and not counted (the fit's
first call loads the fp32 copy of the network).
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from models.manifest import read_manifest
from server.config import ServerConfig
from server.engine import running_engine
from server.precision import resolve_dtype
from server.session import transcribe
from training.data import load_audio


def cpu_model() -> str:
    """The CPU's name, family and model (some machines name only the vendor's line)."""
    fields: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.processor()
    return f"{fields['model name']}, family {fields.get('cpu family')} model {fields.get('model')}"


async def measure(
    manifest: Path, files: int, dtype: str, steps: int, rate: float
) -> dict[str, Any]:
    utts = read_manifest(manifest)
    pick = np.random.default_rng(0).choice(len(utts), files + 1, replace=False)
    audio = [load_audio(str(utts[i].audio)) for i in pick]
    # every step shape warmed before the first file: no warm-up between the timed ones
    config = ServerConfig(dtype=dtype, adapt_steps=steps, adapt_rate=rate, warmup="all")
    rows: dict[str, list[float]] = {"plain": [], "adapted": []}
    async with running_engine(config) as engine:
        for i, clip in enumerate(audio):
            for name, adapt in (("plain", False), ("adapted", True)):
                began = time.perf_counter()
                await transcribe(engine, clip, adapt)
                if i:  # the first is the warm-up
                    rows[name].append((time.perf_counter() - began) / (len(clip) / 16000))
    seconds = sum(len(a) for a in audio[1:]) / 16000
    return {
        "manifest": str(manifest),
        "files": files,
        "audio_seconds": round(seconds, 1),
        "dtype": f"{dtype} ({resolve_dtype(dtype, 'cpu')[0]})",
        "fit": {"steps": steps, "rate": rate},
        "cpu": cpu_model(),
        "rtf": {
            k: {"median": float(np.median(v)), "mean": float(np.mean(v)), "max": float(np.max(v))}
            for k, v in rows.items()
        },
    }


def main() -> None:
    manifest, out = Path(sys.argv[1]), Path(sys.argv[2])
    files = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    dtype = sys.argv[4] if len(sys.argv) > 4 else "auto"
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    rate = float(sys.argv[6]) if len(sys.argv) > 6 else 0.05
    result = asyncio.run(measure(manifest, files, dtype, steps, rate))
    print(json.dumps(result, indent=1))
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
