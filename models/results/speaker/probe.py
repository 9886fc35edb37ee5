"""Does a speaker's profile, fitted once on their first utterances, read their later ones
better than each utterance's own fit? (offline probe)

Usage: python models/results/speaker/probe.py BUNDLE MANIFEST OUT.json [ENROL]

`adapt/carry.py` fitted the input transform on the one previous utterance of a voice and
kept half the file's gain. A WebSocket session or a dictation user speaks for minutes, so a
stream could know its speaker from far more audio. Per voice, the first ENROL utterances
(default 16, about a minute) are the enrolment; every later utterance is scored, under:
- "served": the bundle as served;
- "whole": the file option (each utterance fitted on itself, mixed evenly with the plain
  copies), for reference;
- "profile in": the input transform fitted on the whole enrolment at once (10 steps at 0.05
  over up to 60 s), mixed evenly with the plain copies ("alone": not mixed);
- "profile bn": AdaBN, each BatchNorm's statistics of the first network measured on the
  enrolment instead of the training data (per warped copy), mixed evenly ("alone" too);
- "whole + profile in": a third each.
The pair's other network hears every utterance as served.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from evaluation.variants import score_variants
from models.bundle import unfold_batchnorm
from models.ds2 import DS2, SequenceBatchNorm
from models.ensemble import Networks, load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputTransforms, fit_transforms
from models.manifest import Utterance, read_manifest
from models.mixing import mix_numpy
from models.results.adapt.probe import F32, others_served
from models.warp import warp_features
from training.data import load_audio

PROFILE = AdaptConfig(steps=10, rate=0.05, max_seconds=60)
CALIBRATION = Path("data/corpus/train.jsonl")  # the unfolded copy's reference statistics
CALIBRATION_UTTERANCES = 200


def features(path: Path | str, model: DS2) -> torch.Tensor:
    return torch.from_numpy(featurize(load_audio(str(path)), model.config.features))


def out(model: DS2, feats: torch.Tensor) -> F32:
    """Log-probs [T', V] of raw frames [T, F]."""
    with torch.no_grad():
        lp = model(feats[None], torch.tensor([feats.shape[0]]))[0][0]
    return np.asarray(lp.float().numpy(), np.float32)


def frozen_first(bundle: Path) -> tuple[Networks, DS2, list[float]]:
    """The bundle's networks, its first one with no gradients kept for its weights, and the
    even shares of that network's warped copies."""
    torch.set_num_threads(2)
    nets = load_networks(bundle)
    for p in nets.models[0].parameters():
        p.requires_grad_(False)
    copies = len(nets.models[0].config.warp_factors or (1.0,))
    return nets, nets.models[0], [1.0 / copies] * copies


def by_voice(manifest: Path) -> dict[str | None, list[Utterance]]:
    """The manifest's utterances per voice, each voice's in manifest order."""
    voices: dict[str | None, list[Utterance]] = defaultdict(list)
    for u in read_manifest(manifest):
        voices[u.voice].append(u)
    return voices


def scored(
    bundle: Path, model: DS2, refs: list[str], variants: dict[str, list[F32]]
) -> dict[str, dict[str, float]]:
    """Each variant's greedy CER and beam WER (the bundle's search), paired against "served"."""
    cfg = model.config
    decoder = load_decoder(bundle, Alphabet.from_list(cfg.alphabet), cfg.frame_seconds)
    return score_variants(decoder, cfg.alphabet, refs, variants, "served")


def report(
    dest: Path, bundle: Path, manifest: Path, refs: list[str], rows: object, **fields: object
) -> None:
    """A probe's result file: what it read, its own settings (`fields`), and its rows."""
    head = {"bundle": str(bundle), "manifest": str(manifest), **fields}
    dest.write_text(
        json.dumps({**head, "scored_utterances": len(refs), "rows": rows}, indent=1) + "\n"
    )


def adabn(model: DS2, enrol: list[torch.Tensor], share: float) -> DS2:
    """A copy of unfolded `model` whose BatchNorms normalise with the statistics of the
    enrolment frames (`share` of them, the rest the training data's), measured layer after
    layer as training measures a batch's."""
    spk = copy.deepcopy(model)
    bns = [m for m in spk.modules() if isinstance(m, SequenceBatchNorm)]
    before = [(b.running_mean.clone(), b.running_var.clone()) for b in bns]
    for b in bns:
        b.train()
        b.momentum = 1.0
    lengths = torch.tensor([e.shape[0] for e in enrol])
    batch = torch.nn.utils.rnn.pad_sequence(enrol, batch_first=True)
    with torch.no_grad():
        spk(batch, lengths)
    for b, (mean, var) in zip(bns, before, strict=True):
        b.eval()
        b.running_mean.lerp_(mean, 1 - share)
        b.running_var.lerp_(var, 1 - share)
    return spk.eval()


def main() -> None:
    bundle, manifest, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    enrol_n = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    nets, first, even = frozen_first(bundle)
    fcfg, factors = first.config.features, first.config.warp_factors or (1.0,)
    calib = [features(u.audio, first) for u in read_manifest(CALIBRATION)[:CALIBRATION_UTTERANCES]]
    unfolded = unfold_batchnorm(first, calib).eval()
    names = [
        "served",
        "whole",
        "profile in",
        "profile in alone",
        "profile bn",
        "profile bn alone",
        "profile bn 0.5",
        "whole + profile in",
    ]
    variants: dict[str, list[F32]] = {n: [] for n in names}
    refs: list[str] = []
    t0 = time.time()
    for voice, utts in by_voice(manifest).items():
        enrol = [features(u.audio, first) for u in utts[:enrol_n]]
        pooled = torch.cat(enrol).numpy()
        profile = fit_transforms(first, pooled, factors, PROFILE)
        bn_full = [
            adabn(unfolded, [warp_features(e, a, fcfg) for e in enrol], 1.0) for a in factors
        ]
        bn_half = [
            adabn(unfolded, [warp_features(e, a, fcfg) for e in enrol], 0.5) for a in factors
        ]
        print(
            f"{voice}: enrolled {pooled.shape[0] / 100:.0f} s in {time.time() - t0:.0f} s",
            flush=True,
        )
        for u in utts[enrol_n:]:
            feats = features(u.audio, first)
            copies = [warp_features(feats, a, fcfg) for a in factors]
            plain = mix_numpy([out(first, c) for c in copies], even)
            others = others_served(nets, feats[None])

            def pair(first_out: F32, others: list[F32] = others) -> F32:
                return mix_numpy([first_out, *others], nets.weights)

            def through(t: InputTransforms, copies: list[torch.Tensor] = copies) -> F32:
                return mix_numpy([out(first, t.apply(c, k)) for k, c in enumerate(copies)], even)

            def models(ms: list[DS2], copies: list[torch.Tensor] = copies) -> F32:
                return mix_numpy([out(m, c) for m, c in zip(ms, copies, strict=True)], even)

            own = through(fit_transforms(first, feats.numpy(), factors))
            prof = through(profile)
            bn1, bn5 = models(bn_full), models(bn_half)
            half = [0.5, 0.5]
            variants["served"].append(pair(plain))
            variants["whole"].append(pair(mix_numpy([plain, own], half)))
            variants["profile in"].append(pair(mix_numpy([plain, prof], half)))
            variants["profile in alone"].append(pair(prof))
            variants["profile bn"].append(pair(mix_numpy([plain, bn1], half)))
            variants["profile bn alone"].append(pair(bn1))
            variants["profile bn 0.5"].append(pair(mix_numpy([plain, bn5], half)))
            variants["whole + profile in"].append(pair(mix_numpy([plain, own, prof], [1 / 3] * 3)))
            refs.append(u.text)
    print(f"{len(refs)} utterances scored, {time.time() - t0:.0f} s", flush=True)
    rows = scored(bundle, first, refs, variants)
    fit = {"steps": PROFILE.steps, "rate": PROFILE.rate, "max_seconds": PROFILE.max_seconds}
    report(dest, bundle, manifest, refs, rows, enrol_utterances=enrol_n, profile=fit)


if __name__ == "__main__":
    main()
