"""Shrink a bundle's weights to a quarter for carrying to a lent GPU machine, and back.

The device tool carries 64 MiB in all, and every MiB of weights is a MiB less corpus. Matrices
go as int8 with one fp32 scale per output row, everything else as fp16. That is ample for
initial weights that training moves on from at once: a step-600 model scored the same dev
greedy CER (57.84%) before and after the round trip.

Trained weights come back as fp16 (`half` there, `full` here): a 3 x GRU 768 bundle is 42 MB in
fp32, and the last and best bundles together would not fit the 64 MiB that comes back.

Usage: carry_weights.py pack BUNDLE DIR | carry_weights.py unpack DIR BUNDLE
       carry_weights.py half BUNDLE DIR | carry_weights.py full DIR BUNDLE
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

PACKED = "weights.int8.safetensors"


def pack(bundle: Path, out: Path) -> None:
    tensors: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    for name, t in load_file(bundle / "model.safetensors").items():
        kinds[name] = str(t.dtype).removeprefix("torch.")
        if t.is_floating_point() and t.ndim >= 2 and t.numel() > 4096:
            rows = t.float().reshape(t.shape[0], -1)
            scale = rows.abs().amax(1).clamp_min(1e-12) / 127
            tensors[name] = torch.round(rows / scale[:, None]).to(torch.int8).reshape(t.shape)
            tensors[name + ".scale"] = scale
            kinds[name] = "int8:" + kinds[name]
        else:
            tensors[name] = t.half() if t.is_floating_point() else t
    save_file(tensors, out / PACKED, metadata={"kinds": json.dumps(kinds)})


def _restore(packed: Path, bundle: Path) -> None:
    """Weights as saved by `pack` or `half`, back in the dtypes their metadata names."""
    with safe_open(str(packed), "pt") as f:
        kinds: dict[str, str] = json.loads(f.metadata()["kinds"])
    stored = load_file(packed)
    tensors: dict[str, torch.Tensor] = {}
    for name, kind in kinds.items():
        t = stored[name]
        if kind.startswith("int8:"):
            rows = t.float().reshape(t.shape[0], -1) * stored[name + ".scale"][:, None]
            t, kind = rows.reshape(t.shape), kind.removeprefix("int8:")
        tensors[name] = t.to(getattr(torch, kind)).contiguous()
    save_file(tensors, bundle / "model.safetensors")


def unpack(packed: Path, bundle: Path) -> None:
    _restore(packed / PACKED, bundle)


HALF = "model.fp16.safetensors"


def half(bundle: Path, out: Path) -> None:
    tensors = load_file(bundle / "model.safetensors")
    kinds = {n: str(t.dtype).removeprefix("torch.") for n, t in tensors.items()}
    small = {n: t.half() if t.dtype == torch.float32 else t for n, t in tensors.items()}
    save_file(small, out / HALF, metadata={"kinds": json.dumps(kinds)})


def full(packed: Path, bundle: Path) -> None:
    _restore(packed / HALF, bundle)


def main() -> None:
    command, src, dst = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    dst.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "CARD.md"):
        if (src / f).exists():
            shutil.copy(src / f, dst / f)
    {"pack": pack, "unpack": unpack, "half": half, "full": full}[command](src, dst)


if __name__ == "__main__":
    main()
