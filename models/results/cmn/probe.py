"""Would normalising each utterance's mean log-mel spectrum to the training set's help on
voices the network never heard? (an offline probe of test-time mean normalisation)

Usage (repository root): python models/results/cmn/probe.py OUT.jsonl LAMBDA...

For each utterance, its features' per-bin mean over its louder frames (the top 70% by frame
energy, so that silence does not set it) is moved LAMBDA of the way to the training set's
mean (the model's normalisation buffer `feat_mean`): LAMBDA 0 is the shipped input, 1 takes
the utterance's average spectral shape (channel, tilt, part of the voice) out entirely. The
shipped network then runs with its speaker adaptation, and the shipped decoder.json decodes.
Offline: the whole utterance's mean is known before its first frame, which a stream would
have to estimate as it goes. One line per (set, LAMBDA) of greedy CER and beam WER.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from decoder.alphabet import Alphabet
from decoder.bench import greedy as greedy_text
from decoder.loading import load_decoder
from decoder.metrics import cer, wer
from models.bundle import load_bundle
from models.features import featurize
from models.manifest import read_manifest
from models.warp import adapted_forward
from training.data import load_audio

SETS = {"tts_dev": "data/corpus/dev.jsonl", "her_dev": "data/asterisk/dev.jsonl"}
BUNDLE = Path("models/default")


F32 = npt.NDArray[np.float32]


def shifted(feats: F32, target: F32, lam: float) -> F32:
    energy = feats.mean(axis=1)
    loud = feats[energy >= np.quantile(energy, 0.3)]
    out: F32 = (feats - lam * (loud.mean(axis=0) - target)).astype(np.float32)
    return out


def main(out_path: Path, lambdas: list[float]) -> None:
    torch.set_num_threads(2)
    model = load_bundle(BUNDLE)
    target = model.feat_mean.numpy()
    alphabet = Alphabet.from_list(model.config.alphabet)
    decoder = load_decoder(BUNDLE, alphabet, model.config.frame_seconds)
    read_greedy = greedy_text(alphabet)
    with open(out_path, "w") as out:
        for name, manifest in SETS.items():
            utts = read_manifest(manifest)
            feats = [featurize(load_audio(str(u.audio)), model.config.features) for u in utts]
            refs = [u.text for u in utts]
            for lam in lambdas:
                greedy, beam = [], []
                with torch.inference_mode():
                    for f in feats:
                        x = torch.from_numpy(shifted(f, target, lam))[None]
                        y, n = adapted_forward(model, x, torch.tensor([x.shape[1]]))
                        lp = y[0, : int(n[0])].float().numpy()
                        greedy.append(read_greedy(lp))
                        beam.append(decoder.decode(lp)[0].text)
                row = {
                    "set": name,
                    "lambda": lam,
                    "greedy_cer": round(100 * cer(zip(refs, greedy, strict=True)).rate, 2),
                    "beam_wer": round(100 * wer(zip(refs, beam, strict=True)).rate, 2),
                }
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [float(a) for a in sys.argv[2:]])
