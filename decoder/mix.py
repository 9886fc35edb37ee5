"""`harken mix-lm`: interpolate a general English LM with a bundle's own.

    harken mix-lm --bundle models/default --lm en-us.lm.bin --weight 0.8 --name general

A bundle's LM has read the texts its model was trained around, and little else; a general
LM has read far more English but none of their phrasing. The search then asks both at every
word and adds their probabilities at the weights (decoder/lm.py `InterpolatedLM`).

--lm is an ARPA file or a PocketSphinx trie binary (decoder/sphinx_lm.py), such as the US
English trigram the `pocketsphinx` package ships. It becomes BUNDLE/NAME.binary (KenLM trie,
8-bit quantised) and BUNDLE/NAME.unigrams.txt (its words that the alphabet spells, so that
the search spells them too); decoder.json's `mix` records it with its weight, order, counts
and source. Its weight and bonus were tuned for the old LM: re-tune them (`harken tune-lm`).
`--remove NAME` takes a mixed LM out again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from decoder.alphabet import ENGLISH
from decoder.build import SPECIAL, arpa_unigrams
from decoder.kenlm_tools import DEFAULT_CACHE, ensure_tools
from decoder.loading import DECODER_JSON, read_decoder_json
from decoder.sphinx_lm import is_sphinx_trie, read_sphinx_trie, write_arpa


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, required=True, help="bundle with a decoder.json")
    parser.add_argument("--lm", type=Path, help="ARPA file or PocketSphinx trie binary to mix in")
    parser.add_argument(
        "--weight", type=float, help="its share of each probability, in (0, 1); the bundle's "
        "own LM keeps what the mixed ones leave",
    )  # fmt: skip
    parser.add_argument("--name", default="general", help="file stem in the bundle")
    parser.add_argument(
        "--alphabet", default="".join(ENGLISH), help="characters the acoustic model spells"
    )
    parser.add_argument("--remove", metavar="NAME", help="take the mixed LM NAME out instead")
    parser.add_argument("--kenlm-dir", type=Path, default=DEFAULT_CACHE, help="KenLM build cache")


def main(args: argparse.Namespace) -> int:
    try:
        doc = read_decoder_json(args.bundle)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(str(e)) from None
    if args.remove:
        return _remove(args.bundle, doc, args.remove)
    if args.lm is None or args.weight is None:
        raise SystemExit("--lm and --weight are needed (or --remove NAME)")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name) or args.name == "lm":
        raise SystemExit(f"--name {args.name!r}: letters, digits, '_' or '-', and not 'lm'")
    if not args.lm.is_file():
        raise SystemExit(f"--lm {args.lm} does not exist")
    others = [m for m in doc.get("mix", []) if m["lm"] != f"{args.name}.binary"]
    if not 0.0 < args.weight < 1.0 or args.weight + sum(m["weight"] for m in others) >= 1.0:
        raise SystemExit(
            f"--weight {args.weight}: each mixed LM's weight lies in (0, 1), and together they "
            "must leave the bundle's own LM a share"
        )
    if doc.get("unit", "word") != "word":
        raise SystemExit("mix-lm mixes word LMs; this bundle's LM is over characters")
    entry = mix_in(args.lm, args.bundle, args.name, args.alphabet, args.kenlm_dir)
    doc["mix"] = [*others, {**entry, "weight": args.weight}]
    (args.bundle / DECODER_JSON).write_text(json.dumps(doc, indent=2) + "\n")
    size = (args.bundle / entry["lm"]).stat().st_size
    print(
        f"wrote {args.bundle}/{entry['lm']} ({size / 1e6:.1f} MB, {entry['vocabulary']:,} words "
        f"spelt), mixed in at {args.weight}; re-tune alpha and beta (harken tune-lm)"
    )
    return 0


def mix_in(lm: Path, bundle: Path, name: str, alphabet: str, kenlm_dir: Path) -> dict[str, Any]:
    """Write BUNDLE/NAME.binary and NAME.unigrams.txt from an ARPA or PocketSphinx LM; returns
    what decoder.json's `mix` records of it (without the weight)."""
    tools = ensure_tools(kenlm_dir)
    spelt = re.compile("[" + re.escape(alphabet.replace(" ", "")) + "]+")
    with tempfile.TemporaryDirectory() as tmp:
        arpa = lm
        if is_sphinx_trie(lm):
            arpa = Path(tmp) / "lm.arpa"
            write_arpa(read_sphinx_trie(lm), arpa)
        counts = arpa_counts(arpa)
        binary = [str(tools.build_binary), "-q", "8", "-b", "8", "-a", "22", "trie"]
        out = bundle / f"{name}.binary"
        result = subprocess.run([*binary, str(arpa), str(out)], capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"build_binary could not read {lm}: {result.stderr.strip()[-400:]}")
        words = sorted(w for w in arpa_unigrams(arpa) - SPECIAL if spelt.fullmatch(w))
    (bundle / f"{name}.unigrams.txt").write_text("".join(w + "\n" for w in words))
    return {
        "lm": out.name,
        "unigrams": f"{name}.unigrams.txt",
        "order": len(counts),
        "ngrams": counts,
        "vocabulary": len(words),
        "source": f"{lm.name} (sha256 {_sha256(lm)[:16]})",
    }


def arpa_counts(arpa: Path) -> list[int]:
    """The n-gram counts of an ARPA file's header; SystemExit if it has none."""
    counts = []
    with arpa.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("ngram "):
                counts.append(int(line.split("=")[1]))
            elif counts and line.startswith("\\"):
                break
    if not counts:
        raise SystemExit(f"{arpa} is neither an ARPA file nor a PocketSphinx trie LM")
    return counts


def _remove(bundle: Path, doc: dict[str, Any], name: str) -> int:
    mix = doc.get("mix", [])
    kept = [m for m in mix if m["lm"] != f"{name}.binary"]
    if len(kept) == len(mix):
        have = ", ".join(m["lm"].removesuffix(".binary") for m in mix) or "none"
        raise SystemExit(f"no mixed LM {name!r} in {bundle} (mixed: {have})")
    if kept:
        doc["mix"] = kept
    else:
        doc.pop("mix")
    (bundle / DECODER_JSON).write_text(json.dumps(doc, indent=2) + "\n")
    for path in (bundle / f"{name}.binary", bundle / f"{name}.unigrams.txt"):
        path.unlink(missing_ok=True)
    print(f"took {name} out of {bundle}; re-tune alpha and beta (harken tune-lm)")
    return 0


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
