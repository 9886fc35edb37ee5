"""Average the weights of bundles of one network shape into a new bundle (a "model soup").

Usage: python experiments/soup/soup.py OUT BUNDLE[*W] [BUNDLE[*W] ...]

The soup takes models/default's config, LM, decoder settings and speaker warps, so it is
scored exactly as the shipped model is (`harken eval --bundle OUT ...`). `*W` weighs a
bundle W times. Integer tensors (none in today's networks) are taken from the first bundle.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def soup(out: Path, specs: list[str], base: Path = Path("models/default")) -> None:
    weighted: list[tuple[dict[str, torch.Tensor], float]] = []
    for spec in specs:
        path, _, weight = spec.partition("*")
        weighted.append((load_file(str(Path(path) / "model.safetensors")), float(weight or 1)))
    first = weighted[0][0]
    for tensors, _ in weighted[1:]:
        if tensors.keys() != first.keys() or any(tensors[k].shape != first[k].shape for k in first):
            raise SystemExit("soup: the bundles are not of one network shape")
    total = sum(w for _, w in weighted)
    averaged = {
        name: (torch.stack([t[name].double() * w for t, w in weighted]).sum(0) / total).to(
            tensor.dtype
        )
        if tensor.is_floating_point()
        else tensor
        for name, tensor in first.items()
    }
    out.mkdir(parents=True, exist_ok=True)
    for f in base.iterdir():  # the first network's files; an ensemble's members stay out
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    save_file(averaged, str(out / "model.safetensors"))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    soup(Path(sys.argv[1]), sys.argv[2:])
