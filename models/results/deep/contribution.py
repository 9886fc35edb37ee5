"""How much a bundle's top residual layer adds to what it hands on: ||gain * GRU(x)|| / ||x||
over every tenth utterance of a manifest (deep.md). With GAIN, the bundle is first deepened by
one such layer starting at that gain (the stage's start).

    .venv/bin/python models/results/deep/contribution.py BUNDLE MANIFEST [GAIN]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import soundfile as sf
import torch

from models.bundle import load_bundle
from models.features import featurize
from training.grow import deepen


def main(bundle: str, manifest: str, gain: float | None = None) -> None:
    model = load_bundle(bundle)
    if gain is not None:
        model = deepen(model, model.config.rnn_layers + 1, gain=gain).eval()
    top = model.rnn_stack[-1]
    assert top.gain is not None, f"{bundle}: the top recurrent layer is not residual"
    sums = {"added": 0.0, "input": 0.0}

    def measure(_: torch.nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        x = args[0].to(out.dtype)  # the layer hands on x + gain * GRU(x)
        sums["added"] += float((out - x).norm() ** 2)
        sums["input"] += float(x.norm() ** 2)

    top.register_forward_hook(measure)
    rows = [json.loads(line) for line in Path(manifest).read_text().splitlines()][::10]
    with torch.no_grad():
        for row in rows:
            audio, _ = sf.read(str(Path(manifest).parent / row["audio"]), dtype="float32")
            feats = torch.from_numpy(featurize(audio, model.config.features))[None]
            model(feats, torch.tensor([feats.shape[1]]))
        g = top.gain.abs()
    print(
        f"{bundle}: {len(rows)} utterances, mean |gain| {float(g.mean()):.4f} "
        f"(max {float(g.max()):.4f}), ||gain * GRU(x)|| / ||x|| {(sums['added'] / sums['input']) ** 0.5:.4f}"
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None)
