"""The `harken` command line: one program, subcommands owned by the packages they drive.

Each subcommand is a module exposing `add_arguments(parser)` and `main(args) -> int`.
Modules are imported only when their subcommand runs, so `harken --help` stays fast
and a missing optional dependency of one command never breaks another.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("server.cli_serve", "run the streaming ASR server"),
    "transcribe": ("server.cli_transcribe", "transcribe audio files (in-process or via a server)"),
    "train": ("training.cli", "train an acoustic model from manifests"),
    "teacher": (
        "training.teacher",
        "a teacher's (Whisper's encoder) frame targets for distillation, once per corpus",
    ),
    "punctuation": (
        "training.punctuation",
        "train the punctuation and capitals model on written English, and measure it",
    ),
    "punctuation-text": (
        "corpus.punctuation_text",
        "written English for the punctuation model (Brown, fortunes); held-out text left out",
    ),
    "synth": ("corpus.synth", "synthesise a speech corpus with seven TTS engines"),
    "prepare": (
        "corpus.prepare",
        "turn a corpus you have (LibriSpeech, Common Voice, Kaldi, CSV, Asterisk) into manifests",
    ),
    "lm-text": (
        "corpus.lm_text",
        "LM text from WordNet's glosses or your own raw text; held-out text left out",
    ),
    "eval": ("evaluation.cli_eval", "WER/CER of a bundle on a manifest, greedy and with the LM"),
    "compare": (
        "evaluation.compare",
        "is one bundle better than another? paired bootstrap over two `eval` reports",
    ),
    "build-lm": ("decoder.build", "build a KenLM n-gram (word or character) for decoding"),
    "mix-lm": (
        "decoder.mix",
        "interpolate a general English LM (ARPA or PocketSphinx's) with a bundle's own",
    ),
    "ensemble": (
        "models.ensemble",
        "add a second network to a bundle: their per-frame probabilities are averaged",
    ),
    "tune-lm": ("evaluation.cli_tune", "search LM weight and insertion bonus on a dev manifest"),
    "tune-warp": (
        "evaluation.tune_warp",
        "choose speaker-adaptation warp factors on a dev manifest",
    ),
    "bench-decoder": ("evaluation.cli_bench_decoder", "compare decoders on a manifest"),
    "bench-model": (
        "evaluation.bench_model",
        "streaming step latency per batch size and precision",
    ),
    "bench-workers": ("evaluation.bench_workers", "decoder workers as threads vs processes"),
    "floor": (
        "evaluation.floor",
        "FLOPs per stream-second, GEMM rates and step times: the model's stream capacity",
    ),
    "loadtest": ("loadtest.run", "latency load test against a running server"),
}


def _version() -> str:
    """The installed distribution's version (pyproject.toml), or 'unknown' when run from a
    source tree that was never installed."""
    try:
        return importlib.metadata.version("harken")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="harken", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"harken {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if argv and argv[0] == "--version":
        parser.parse_args(argv[:1])  # prints the version and exits
    if argv and argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if not argv:  # a command is needed: say which there are, as for a wrong one
        parser.print_help(sys.stderr)
        return 2
    if argv[0] not in COMMANDS:
        parser.error(f"unknown command {argv[0]!r}; choose one of: {', '.join(COMMANDS)}")
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    cmd_parser = argparse.ArgumentParser(prog=f"harken {name}", description=COMMANDS[name][1])
    module.add_arguments(cmd_parser)
    args = cmd_parser.parse_args(argv[1:])
    return int(module.main(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
