"""How differently does a network hear two feature-augmented views of one utterance?

    python models/results/consistency/views.py OUT.json MANIFEST:N... -- NAME=BUNDLE...

For each bundle (the first network only, fp32, no speaker warps) and each manifest's first N
utterances (every utterance's two views drawn as training draws them, light preset, seed 0):
the mean per-frame KL between the two views' output distributions (each view against its twin,
as training/consistency.py scores it), and the share of output frames whose best symbol differs.
What the consistency stage optimises, read on training audio and on voices it never heard.
"""

from __future__ import annotations

import json
import sys

import torch

from models.bundle import load_bundle
from models.manifest import read_manifest
from training.augment import AUGMENT_PRESETS
from training.consistency import consistency_losses
from training.data import DataConfig, SpeechDataset, collate


def main(argv: list[str]) -> int:
    out, rest = argv[0], argv[1:]
    split = rest.index("--")
    sets, bundles = rest[:split], dict(b.split("=", 1) for b in rest[split + 1 :])
    torch.set_num_threads(2)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, path in bundles.items():
        model = load_bundle(path)
        for spec in sets:
            manifest, n = spec.rsplit(":", 1)
            utts = read_manifest(manifest)[: int(n)]
            cfg = DataConfig(model.config.features, AUGMENT_PRESETS["light"], seed=0, views=2)
            ds = SpeechDataset(utts, cfg)
            kl = frames = differ = 0.0
            with torch.no_grad():
                for start in range(0, len(ds), 16):
                    batch = collate([ds[i] for i in range(start, min(start + 16, len(ds)))])
                    log_probs, lens = model(batch.feats, batch.feat_lengths)[:2]
                    kl += float(consistency_losses(log_probs, lens).sum())
                    b = log_probs.shape[0] // 2
                    best = log_probs.argmax(-1)
                    valid = torch.arange(best.shape[1])[None] < lens[:b, None]
                    differ += float(((best[:b] != best[b:]) & valid).sum())
                    frames += float(valid.sum())
            row = {"kl_per_frame": kl / (2 * frames), "best_differs": differ / frames}
            results.setdefault(name, {})[spec] = row
            print(name, spec, json.dumps(row), flush=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
