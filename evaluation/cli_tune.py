"""`harken tune-lm`: random search of alpha and beta on a dev manifest, written into the
bundle's decoder.json. The network runs once; each trial only decodes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder, update_decoder_json
from decoder.tune import tune
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
    parser.add_argument("--dry-run", action="store_true", help="print, do not write decoder.json")


def main(args: argparse.Namespace) -> int:
    outputs = manifest_log_probs(args.bundle, args.manifest, args.limit)
    alphabet = Alphabet.from_list(outputs.config.alphabet)
    decoder = load_decoder(args.bundle, alphabet, outputs.config.frame_seconds)
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
    print(json.dumps({"best": best.__dict__, "utterances": len(outputs.references)}))
    if not args.dry_run:
        update_decoder_json(args.bundle, alpha=best.alpha, beta=best.beta)
        print(f"wrote alpha={best.alpha} beta={best.beta} into {args.bundle}/decoder.json")
    return 0
