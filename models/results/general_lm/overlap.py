"""Has the general LM read our held-out sentences? Trigram hits per set, against the shipped LM.

Usage (repository root): python models/results/general_lm/overlap.py BUNDLE

For each manifest's transcripts: the share of words (from the third on) that each LM scores
with a full trigram (KenLM's n-gram length >= 3), and the share of sentences of six or more
words scored with full trigrams throughout, which is what an LM that had read the sentence
would show. The shipped LM left out anything sharing six words with them (`harken lm-text
--held-out`), so its row is the level of chance phrasing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import kenlm

SETS = {
    "TTS dev": "data/corpus/dev.jsonl",
    "TTS test": "data/corpus/test.jsonl",
    "her dev": "data/asterisk/dev.jsonl",
    "her test": "data/asterisk/test.jsonl",
    "prose dev": "data/prose/dev.jsonl",  # the Brown corpus, read by neither LM (prose.md)
    "prose test": "data/prose/test.jsonl",
}


def main(bundle: Path) -> None:
    models = {"shipped": kenlm.Model(str(bundle / "lm.binary")),
              "general": kenlm.Model(str(bundle / "general.binary"))}  # fmt: skip
    for name, manifest in SETS.items():
        texts = [json.loads(line)["text"] for line in Path(manifest).read_text().splitlines()]
        row: dict[str, object] = {"set": name, "sentences": len(texts)}
        for label, model in models.items():
            hits = words = whole = long = 0
            for text in texts:
                lengths = [n for _, n, _ in model.full_scores(text, bos=True, eos=False)][2:]
                hits += sum(n >= 3 for n in lengths)
                words += len(lengths)
                if len(text.split()) >= 6:
                    long += 1
                    whole += all(n >= 3 for n in lengths)
            row[f"{label} trigram hits"] = round(100 * hits / max(words, 1), 1)
            row[f"{label} whole sentences"] = f"{whole}/{long}"
        print(json.dumps(row))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
