"""A bundle's per-frame log-probs on a manifest, written as `harken train --teacher` targets
(kind "log_probs": the trainer's KL term on its own output, training/distill.py SoftTargets).

The bundle is heard as served (its warps, its ensemble members mixed), on clean audio, once.

    python experiments/soft_tts/targets.py BUNDLE OUT MANIFEST... [--dtype bf16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.cli_eval import log_probs
from models.ensemble import load_networks
from models.manifest import read_manifest


class Unwarped:
    """The networks heard without their speaker warps (members still mixed)."""

    def __init__(self, networks: Any) -> None:
        self._networks = networks

    def __getattr__(self, name: str) -> Any:
        return getattr(self._networks, name)

    def forward(self, feats: Any, lengths: Any, **_: Any) -> Any:
        return self._networks.forward(feats, lengths, adapt=False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle")
    p.add_argument("out")
    p.add_argument("manifest", nargs="+")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--no-warps", action="store_true", help="hear without the speaker warps")
    p.add_argument("--chunk", type=int, default=400, help="utterances per forward round")
    args = p.parse_args()
    model = load_networks(args.bundle, dtype=args.dtype)
    if args.no_warps:  # the warps exist for unheard voices; the training voices are heard
        model = Unwarped(model)  # type: ignore[assignment]
    utts = [u for m in args.manifest for u in read_manifest(m, check_audio=True)]
    utts = list({str(u.audio): u for u in utts}.values())  # each audio file once
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "frames.f16.tmp"
    rows: dict[str, tuple[int, int]] = {}
    offset, t0 = 0, time.perf_counter()
    stride, hop_ms = model.config.time_stride, model.config.features.hop_ms
    with tmp.open("wb") as f:
        for start in range(0, len(utts), args.chunk):
            part = utts[start : start + args.chunk]
            lps, _ = log_probs(model, part, batch_frames=12000, batch_size=32)
            for u, lp in zip(part, lps, strict=True):
                f.write(lp.astype(np.float16).tobytes())
                rows[str(u.audio)] = (offset, len(lp))
                offset += len(lp)
            done = start + len(part)
            rate = done / (time.perf_counter() - t0)
            print(f"\r{done}/{len(utts)} utterances ({rate:.1f}/s)", end="", file=sys.stderr)
    print(file=sys.stderr)
    dim = model.config.vocab_size
    index = {
        "teacher": f"{args.bundle} ({args.dtype}{', no warps' if args.no_warps else ''})",
        "kind": "log_probs",
        "dim": dim,
        "rate_hz": 1000.0 / (hop_ms * stride),
        "frames": offset,
        "mean": [0.0] * dim,
        "std": [1.0] * dim,
        "rows": rows,
    }
    os.replace(tmp, out / "frames.f16")
    (out / "index.json").write_text(json.dumps(index))
    print(f"{len(rows)} utterances, {offset} frames, {time.perf_counter() - t0:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
