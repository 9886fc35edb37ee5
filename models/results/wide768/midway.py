"""A scoreable bundle from wide768 weights: one bundle's weights, or a weighted average of
several of one shape (a soup), with models/default's speaker warps, LM and decoder settings,
so that it is decoded exactly as the shipped model is (`harken eval --bundle OUT ...`).

Usage (repository root): python models/results/wide768/midway.py OUT BUNDLE[*W] [BUNDLE[*W] ...]

The trainer's exports carry the run's inference settings (no warps: `evaluate` re-tunes them
at the end); a mid-way look takes the shipped ones instead.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from models.config import INFERENCE_ONLY
from models.results.soup.soup import soup

SHIPPED = Path("models/default")


def main(out: Path, specs: list[str]) -> None:
    first = Path(specs[0].partition("*")[0])
    soup(out, specs, base=first)
    shipped = json.loads((SHIPPED / "config.json").read_text())["model"]
    meta = json.loads((out / "config.json").read_text())
    meta["model"].update({k: shipped[k] for k in INFERENCE_ONLY})
    meta.setdefault("provenance", {})["midway_soup_of"] = specs
    (out / "config.json").write_text(json.dumps(meta, indent=1) + "\n")
    for name in ("lm.binary", "unigrams.txt", "decoder.json"):
        shutil.copy(SHIPPED / name, out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
