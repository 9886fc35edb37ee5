"""`harken build-lm`: a pruned, quantised KenLM n-gram (word or character) for the decoder.

    harken build-lm --text data/corpus/lm_text.txt --order 4 --prune 0 1 1 --out models/default
    harken build-lm --text data/corpus/lm_text.txt*3 data/lm/wordnet.txt --out runs/my/bundle

writes OUT/lm.binary (trie, 8-bit quantised), OUT/unigrams.txt (the vocabulary, for the
partial-word check) and OUT/decoder.json, which also records what each text held (so a model
card can say what the LM read after the texts are gone). A bundle's existing decoder.json keeps its search
settings (beam width, threshold, ...; a new LM into models/default must not bring back the
defaults' narrower search), and its weight and bonus unless --alpha/--beta are given: both
were tuned for the old LM, so re-tune them (`harken tune-lm`). The first run compiles
KenLM's lmplz and build_binary (decoder/kenlm_tools.py, a few minutes); later runs reuse them.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from decoder.alphabet import ENGLISH
from decoder.beam import DecoderConfig
from decoder.kenlm_tools import DEFAULT_CACHE, ensure_tools
from decoder.lm import CHAR_SPACE, Unit
from decoder.loading import DECODER_JSON, read_decoder_json, write_decoder_json

SPECIAL = {"<s>", "</s>", "<unk>"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--text",
        nargs="+",
        required=True,
        metavar="FILE[*N]",
        help="normalised text, a sentence a line; several files are joined, and '*N' counts "
        "one N times (in-domain text weighed against a larger general one)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for the LM files")
    parser.add_argument("--order", type=int, default=4, help="n-gram order (KenLM allows <= 6)")
    parser.add_argument(
        "--prune",
        type=int,
        nargs="*",
        default=[0, 1, 1],
        help="lmplz --prune: count thresholds per order (unigrams first; 0 keeps all)",
    )
    parser.add_argument("--unit", choices=["word", "char"], default="word", help="LM tokens")
    parser.add_argument(
        "--alphabet",
        default="".join(ENGLISH),
        help="the characters the text may hold: the acoustic model's symbols (default: "
        "English a-z, apostrophe, space)",
    )
    parser.add_argument("--quantize", type=int, default=8, help="bits for probabilities/backoffs")
    parser.add_argument("--memory", default="512M", help="lmplz -S: sorting memory")
    for name, what in (("alpha", "LM weight"), ("beta", "insertion bonus")):
        default = getattr(DecoderConfig, name)
        parser.add_argument(
            f"--{name}", type=float, help=f"{what} (default: OUT/decoder.json's, else {default})"
        )
    parser.add_argument("--kenlm-dir", type=Path, default=DEFAULT_CACHE, help="KenLM build cache")


def main(args: argparse.Namespace) -> int:
    try:
        texts = [weighted_text(spec) for spec in args.text]
        for path, _ in texts:
            check_text(path, args.alphabet)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if not 2 <= args.order <= 6:
        raise SystemExit(f"--order must be in 2..6 (KenLM's build limit), got {args.order}")
    given = {k: v for k, v in (("alpha", args.alpha), ("beta", args.beta)) if v is not None}
    try:
        old = read_decoder_json(args.out) if (args.out / DECODER_JSON).is_file() else {}
        kept, mixed = old.get("config", {}), old.get("mix", [])
        config = DecoderConfig(**{**kept, **given})
    except ValueError as e:
        raise SystemExit(f"{args.out / DECODER_JSON}: {e}; fix or remove it") from None
    args.out.mkdir(parents=True, exist_ok=True)
    build_lm(
        texts,
        args.out,
        args.order,
        args.prune,
        args.unit,
        args.quantize,
        args.memory,
        args.kenlm_dir,
    )
    described = [describe_text(path, times) for path, times in texts]
    write_decoder_json(
        args.out, config, args.unit, args.order, "lm.binary", "unigrams.txt", described
    )
    size = (args.out / "lm.binary").stat().st_size
    print(f"wrote {args.out}/lm.binary ({size / 1e6:.2f} MB), unigrams.txt, decoder.json")
    if kept:
        print(f"kept {DECODER_JSON}'s search settings; re-tune alpha and beta for the new LM")
    if mixed:
        names = ", ".join(m["lm"] for m in mixed)
        print(f"the new LM is not mixed with {names}; mix again with harken mix-lm")
    return 0


def weighted_text(spec: str) -> tuple[Path, int]:
    """`FILE[*N]` as (path, N); the file must exist and N be at least 1."""
    path, _, times = spec.rpartition("*") if "*" in spec else (spec, "", "1")
    if not times.isdigit() or int(times) < 1:
        raise ValueError(f"--text {spec!r}: the repeat count after '*' must be 1 or more")
    if not Path(path).is_file():
        raise ValueError(f"--text {path} does not exist")
    return Path(path), int(times)


def describe_text(path: Path, times: int) -> dict[str, Any]:
    """What one text gave the LM: its file, repeat count, sentences, words and distinct words,
    and, where `harken lm-text` wrote its report beside it (NAME.report.json), the held-out
    manifests it was filtered against and the shared-run length that filter used."""
    words: Counter[str] = Counter()
    sentences = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            tokens = line.split()
            if tokens:
                sentences += 1
                words.update(tokens)
    record: dict[str, Any] = {
        "file": str(path),
        "times": times,
        "sentences": sentences,
        "words": sum(words.values()),
        "vocabulary": len(words),
    }
    report = path.with_name(path.stem + ".report.json")
    if report.is_file():
        held = json.loads(report.read_text())
        record |= {k: held[k] for k in ("held_out", "ngram") if k in held}
    return record


def check_text(path: Path, alphabet: str) -> None:
    """Raise ValueError at the first line with a character outside `alphabet`.

    The decoder only ever asks the LM about words spelled in the model's symbols, so a word
    with a capital, a digit or punctuation would be dead weight that silently takes
    probability mass from the words it should have counted as."""
    outside = re.compile("[^" + re.escape(alphabet) + "\n]")
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            bad = sorted(set(outside.findall(line)))
            if bad:
                raise ValueError(
                    f"--text {path} line {number}: characters outside the alphabet "
                    f"({' '.join(repr(c) for c in bad[:8])}); normalise raw text first "
                    f"(harken lm-text --text {path} --out ...)"
                )


def build_lm(
    texts: Sequence[tuple[Path, int]],
    out: Path,
    order: int,
    prune: list[int],
    unit: Unit,
    quantize: int = 8,
    memory: str = "512M",
    kenlm_dir: Path = DEFAULT_CACHE,
) -> None:
    """Estimate an ARPA with lmplz over the texts (each repeated its count of times), then
    write lm.binary and unigrams.txt into `out`."""
    tools = ensure_tools(kenlm_dir)
    with tempfile.TemporaryDirectory() as tmp:
        corpus, arpa = Path(tmp) / "corpus.txt", Path(tmp) / "lm.arpa"
        with corpus.open("w") as f:
            for text, times in texts:
                block = "".join(line + "\n" for line in lm_tokens(_lines(text), unit))
                for _ in range(times):
                    f.write(block)
        lmplz = [str(tools.lmplz), "-o", str(order), "-S", memory, "-T", tmp]
        lmplz += ["--discount_fallback", *_prune_args(prune, order)]
        with corpus.open() as src, arpa.open("w") as dst:
            subprocess.run(lmplz, stdin=src, stdout=dst, check=True, stderr=subprocess.DEVNULL)
        binary = [str(tools.build_binary), "-q", str(quantize), "-b", str(quantize)]
        binary += ["-a", "22", "trie", str(arpa), str(out / "lm.binary")]
        subprocess.run(binary, check=True, stdout=subprocess.DEVNULL)
        words = sorted(arpa_unigrams(arpa) - SPECIAL)
        (out / "unigrams.txt").write_text("".join(w + "\n" for w in words))


def _lines(text: Path) -> Iterator[str]:
    with text.open() as f:
        for line in f:
            if line.strip():
                yield line.strip()


def lm_tokens(lines: Iterable[str], unit: Unit) -> Iterator[str]:
    """Lines as the LM's tokens: words as they are, or characters with the space as `|`."""
    for line in lines:
        words = line.split()
        if unit == "word":
            yield " ".join(words)
        else:
            yield f" {CHAR_SPACE} ".join(" ".join(w) for w in words)


def _prune_args(prune: list[int], order: int) -> list[str]:
    if not prune or not any(prune):
        return []
    if any(a > b for a, b in zip(prune, prune[1:], strict=False)) or len(prune) > order:
        raise SystemExit(f"--prune needs at most {order} non-decreasing thresholds, got {prune}")
    return ["--prune", *map(str, prune)]


def arpa_unigrams(arpa: Path) -> set[str]:
    """The words of an ARPA file's 1-gram section."""
    words: set[str] = set()
    with arpa.open() as f:
        section = False
        for line in f:
            if line.startswith("\\"):
                section = line.startswith("\\1-grams:")
                continue
            parts = line.split("\t")
            if section and len(parts) >= 2:
                words.add(parts[1].strip())
    return words
