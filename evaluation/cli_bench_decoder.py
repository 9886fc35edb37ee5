"""`harken bench-decoder`: the bundle's network runs over a manifest once; the same
log-probs are then decoded by ours, pyctcdecode and flashlight-text (decoder/bench.py)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from decoder.alphabet import Alphabet
from decoder.bench import markdown, run_bench, write_results
from evaluation.model_outputs import manifest_log_probs
from models import DEFAULT_BUNDLE
from server.precision import cpu_description


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle dir")
    parser.add_argument("--manifest", type=Path, required=True, help="test manifest (JSON Lines)")
    parser.add_argument("--out", type=Path, required=True, help="writes results.json/.md here")
    parser.add_argument("--limit", type=int, default=0, help="first N utterances (0: all)")


def main(args: argparse.Namespace) -> int:
    outputs = manifest_log_probs(args.bundle, args.manifest, args.limit)
    alphabet = Alphabet.from_list(outputs.config.alphabet)
    inputs = {
        "command": shlex.join(
            ["harken", "bench-decoder", "--bundle", str(args.bundle), "--manifest"]
            + [str(args.manifest), "--out", str(args.out), "--limit", str(args.limit)]
        ),
        "kind": "model",
        "bundle": str(args.bundle),
        "manifest": str(args.manifest),
        "utterances": len(outputs.references),
        "audio_seconds": round(outputs.audio_seconds, 1),
        "cpu": cpu_description(),  # ms/utt differ between the machines' CPU kinds
    }
    results = run_bench(
        outputs.log_probs,
        outputs.references,
        args.bundle,
        alphabet,
        outputs.config.frame_seconds,
        inputs,
    )
    write_results(results, args.out)
    print(markdown(results))
    return 0
