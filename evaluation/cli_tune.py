"""`harken tune-lm`: random search of alpha and beta on a dev manifest, written into the
bundle's decoder.json. The network runs once; each trial only decodes. With
`--blank-penalty` or `--lookahead`, the listed values are tried first at the bundle's
weights (in that order) and the best of each is kept for the search
(experiments/blank.md, experiments/lookahead.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from decoder.alphabet import Alphabet
from decoder.beam import DecoderConfig
from decoder.loading import load_decoder, update_decoder_json
from decoder.tune import sweep_setting, tune
from evaluation.model_outputs import manifest_log_probs
from models import DEFAULT_BUNDLE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle dir")
    parser.add_argument("--manifest", type=Path, required=True, help="dev manifest (JSON Lines)")
    parser.add_argument("--trials", type=int, default=30, help="(alpha, beta) pairs to try")
    parser.add_argument("--alpha", type=float, nargs=2, default=(0.0, 3.0), help="range")
    parser.add_argument("--beta", type=float, nargs=2, default=(-1.0, 4.0), help="range")
    parser.add_argument("--limit", type=int, default=0, help="first N utterances (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--blank-penalty",
        type=float,
        nargs="+",
        metavar="P",
        help="blank penalties to try first (e.g. 0 0.5 0.75 1 1.5); the best is kept and "
        "written with alpha and beta",
    )
    parser.add_argument(
        "--lookahead",
        type=float,
        nargs="+",
        metavar="L",
        help="unigram look-ahead shares to try next, in [0, 1] (e.g. 0 0.5 0.75 1); the best "
        "is kept and written with alpha and beta",
    )
    parser.add_argument("--dry-run", action="store_true", help="print, do not write decoder.json")


def main(args: argparse.Namespace) -> int:
    sweeps = (("blank_penalty", args.blank_penalty), ("lookahead", args.lookahead))
    try:  # every value checked before the network runs over the whole manifest
        for name, values in sweeps:
            for v in values or ():
                DecoderConfig(**{name: v})
    except ValueError as e:
        print(f"harken tune-lm: {e}", file=sys.stderr)
        return 2
    outputs = manifest_log_probs(args.bundle, args.manifest, args.limit)
    alphabet = Alphabet.from_list(outputs.config.alphabet)
    decoder = load_decoder(args.bundle, alphabet, outputs.config.frame_seconds)
    chosen: dict[str, float] = {}
    for name, values in sweeps:
        if not values:
            continue
        value, table = sweep_setting(decoder, name, outputs.log_probs, outputs.references, values)
        for v, rate in table:
            print(f"{name.replace('_', ' ')} {v:g}  WER {rate:.4f}")
        chosen[name] = value
        decoder = decoder.with_config(**{name: value})
    result = tune(
        decoder,
        outputs.log_probs,
        outputs.references,
        args.trials,
        tuple(args.alpha),
        tuple(args.beta),
        args.seed,
    )
    for t in sorted(result.trials, key=lambda t: t.wer):
        print(f"alpha {t.alpha:7.4f}  beta {t.beta:7.4f}  WER {t.wer:.4f}")
    best = result.best
    chosen.update(alpha=best.alpha, beta=best.beta)
    print(json.dumps({"best": chosen, "wer": best.wer, "utterances": len(outputs.references)}))
    if not args.dry_run:
        update_decoder_json(args.bundle, **chosen)
        settings = " ".join(f"{k}={v:g}" for k, v in chosen.items())
        print(f"wrote {settings} into {args.bundle}/decoder.json")
    return 0
