"""`harken tune-warp`: choose a bundle's speaker-adaptation warp factors on a dev manifest
(greedy CER, no LM) and write them into its config.json.

The network runs once per distinct factor over the manifest; every candidate set is then
scored by merging those outputs exactly as a served stream does (`models/warp.select`).
A larger set costs more compute for each stream's first seconds (for the whole stream with
`--merge mean`), so it must beat the smaller ones by `--min-gain` CER points to be chosen.

    harken tune-warp --bundle models/default --manifest data/corpus/dev.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from models import DEFAULT_BUNDLE
from models.bundle import load_bundle, read_bundle_config
from models.config import WARP_MERGES, ModelConfig, WarpMerge
from models.ds2 import DS2
from models.features import featurize
from models.manifest import Utterance, read_manifest
from models.metrics import error_rates, greedy_decode
from models.warp import WarpChoice, select, warp_features
from training.data import load_audio

F32 = npt.NDArray[np.float32]
# () is adaptation off; the others lean downwards (voices higher than the training voices,
# the common case for a model trained on male voices) and one also upwards.
CANDIDATES: tuple[tuple[float, ...], ...] = (
    (),
    (0.8, 1.0),
    (0.75, 0.85, 1.0),
    (0.85, 1.0, 1.15),
    (0.75, 0.85, 1.0, 1.15),
    (0.75, 0.8, 0.85, 0.9, 1.0),
)


@dataclass(frozen=True)
class Trial:
    factors: tuple[float, ...]
    cer: float
    wer: float


def _outputs(
    model: DS2, utterances: Sequence[Utterance], factors: Sequence[float]
) -> list[dict[float, F32]]:
    """Per utterance, the log-probs [T', V] of the whole utterance under each factor."""
    out = []
    with torch.inference_mode():
        for utt in utterances:
            feats = torch.from_numpy(featurize(load_audio(str(utt.audio)), model.config.features))
            batch = torch.stack([warp_features(feats, a, model.config.features) for a in factors])
            lp, n = model(batch, torch.full((len(factors),), feats.shape[0]))
            out.append({a: lp[k, : int(n[k])].float().numpy() for k, a in enumerate(factors)})
    return out


def score(
    outputs: list[dict[float, F32]],
    references: Sequence[str],
    factors: tuple[float, ...],
    decide_frames: int,
    alphabet: Sequence[str],
    merge: WarpMerge = "choose",
) -> Trial:
    """Greedy error rates of one candidate set, merged as the server merges them."""
    hyps = []
    for per_factor in outputs:
        if factors:
            choice = WarpChoice.start(len(factors), factors, merge)
            merged = select([per_factor[a] for a in factors], choice, decide_frames)
        else:
            merged = per_factor[1.0]
        hyps.append(greedy_decode(merged, alphabet))
    rates = error_rates(list(references), hyps)
    return Trial(factors, rates["cer"], rates["wer"])


def best_trial(trials: Sequence[Trial], min_gain: float) -> Trial:
    """The lowest CER, except that a set with more factors must beat every smaller set's
    best by `min_gain` (CER as a fraction, e.g. 0.005) to be worth its compute: every smaller
    set's, not only the one chosen so far, or a set that falls just short against "off" would
    let a larger one in on its gain over "off" alone."""
    chosen: Trial | None = None
    for t in sorted(trials, key=lambda t: (len(t.factors), t.cer)):
        smaller = [s.cer for s in trials if len(s.factors) < len(t.factors)]
        if smaller and t.cer >= min(smaller) - min_gain:
            continue
        if chosen is None or t.cer < chosen.cer:
            chosen = t
    if chosen is None:
        raise ValueError("best_trial needs at least one trial")
    return chosen


def write_warp(
    bundle: Path, factors: tuple[float, ...], decide_frames: int, merge: WarpMerge = "choose"
) -> None:
    """Store the choice in the bundle's config.json (validated as a ModelConfig first)."""
    meta = read_bundle_config(bundle)
    cfg = ModelConfig.from_dict(meta["model"])
    cfg = dataclasses.replace(
        cfg, warp_factors=factors, warp_decide_frames=decide_frames, warp_merge=merge
    )
    meta["model"] = cfg.to_dict()
    (bundle / "config.json").write_text(json.dumps(meta, indent=1) + "\n")


def _factor_set(text: str) -> tuple[float, ...]:
    if text.strip().lower() in ("", "off", "none"):
        return ()
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated factors or 'off', got {text!r}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle dir")
    parser.add_argument("--manifest", type=Path, required=True, help="dev manifest (JSON Lines)")
    parser.add_argument(
        "--candidates",
        type=_factor_set,
        nargs="+",
        default=list(CANDIDATES),
        help="factor sets to try, each comma-separated ('0.8,1.0') or 'off'",
    )
    parser.add_argument("--decide-frames", type=int, default=100, help="frames before fixing")
    parser.add_argument(
        "--merge",
        choices=WARP_MERGES,
        help="how a stream merges its warped copies: keep the most confident ('choose') or "
        "average them all for good ('mean': better on unseen voices, costs the factors' count "
        "in network steps); default: the bundle's own",
    )
    parser.add_argument("--min-gain", type=float, default=0.005, help="CER a larger set must win")
    parser.add_argument("--limit", type=int, default=0, help="first N utterances (0: all)")
    parser.add_argument("--out", type=Path, help="also write the trials as JSON here")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write config.json")


def main(args: argparse.Namespace) -> int:
    model = load_bundle(args.bundle)
    merge = args.merge or model.config.warp_merge
    for c in args.candidates:  # the same check a bundle's config gets, before any work
        dataclasses.replace(model.config, warp_factors=c, warp_decide_frames=args.decide_frames)
    utterances = read_manifest(args.manifest, check_audio=True)
    utterances = utterances[: args.limit] if args.limit else utterances
    factors = sorted({1.0, *(a for c in args.candidates for a in c)})
    outputs = _outputs(model, utterances, factors)
    refs = [u.text for u in utterances]
    trials = [
        score(outputs, refs, c, args.decide_frames, model.config.alphabet, merge)
        for c in args.candidates
    ]
    for t in trials:
        name = ", ".join(f"{a:g}" for a in t.factors) or "off"
        print(f"{name:28s} greedy CER {t.cer:.4f}  WER {t.wer:.4f}")
    best = best_trial(trials, args.min_gain)
    report = {
        "bundle": str(args.bundle),
        "manifest": str(args.manifest),
        "utterances": len(utterances),
        "decide_frames": args.decide_frames,
        "merge": merge,
        "trials": [dataclasses.asdict(t) for t in trials],
        "best": dataclasses.asdict(best),
    }
    print(json.dumps(report["best"]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    if not args.dry_run:
        write_warp(args.bundle, best.factors, args.decide_frames, merge)
        print(
            f"wrote warp_factors={list(best.factors)}, warp_merge={merge} into "
            f"{args.bundle}/config.json"
        )
    return 0
