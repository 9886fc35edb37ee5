"""Average the weights of bundles of one network shape into a new bundle (a "model soup").

Usage: python experiments/soup/soup.py [--base BUNDLE] OUT BUNDLE[*W] [BUNDLE[*W] ...]

The soup takes the base bundle's config, LM, decoder settings and speaker warps (models/default's
unless --base names another, e.g. the first bundle when its shape is not the default's), so it
is scored exactly as that bundle is (`harken eval --bundle OUT ...`). `*W` weighs a
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
    args = sys.argv[1:]
    base = Path("models/default")
    if args[:1] == ["--base"] and len(args) > 1:
        base, args = Path(args[1]), args[2:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    soup(Path(args[0]), args[1:], base=base)
