"""Probe: what the "LM" kind of error is made of, on the dev sets.

Usage (repository root): python models/results/search/lm_kind.py WORK_DIR
(after exact.py, whose cached network outputs it reads)

An utterance is of the LM kind when the network alone prefers the reference but the LM's side
(the LM, the bonus, the unknown-word penalty) made the search prefer its hypothesis. Splits
those utterances by whether the reference holds a word the LM does not know (only spelling
against the unknown-word penalty reaches it: more vocabulary helps) or not (the LM knows
every word and still prefers other ones: better-fitting text or weights help), and prints
both shares of the kind's word errors, with examples.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.loading import load_decoder
from decoder.metrics import edit_distance
from evaluation.attribution import attribute
from models.results.search.exact import BUNDLE, SETS, outputs


def unknown(decoder: BeamSearchDecoder, text: str) -> list[str]:
    """The words of `text` the decoder's LM does not know."""
    lm = decoder.lm
    assert lm is not None and lm.unit == "word"
    state, out = lm.begin(), []
    for word in text.split():
        _, state, known = lm.score(state, word)
        if not known:
            out.append(word)
    return out


def main(work: Path) -> None:
    rows = []
    for name in SETS:
        out = outputs(work, name)
        decoder = load_decoder(
            BUNDLE, Alphabet.from_list(out.config.alphabet), out.config.frame_seconds
        )
        assert isinstance(decoder, BeamSearchDecoder)
        errors = {"oov": 0, "known": 0}
        utts = {"oov": 0, "known": 0}
        examples: list[dict[str, object]] = []
        total_errors = 0
        for lp, ref in zip(out.log_probs, out.references, strict=True):
            hyp = decoder.decode(lp)[0].text
            e = edit_distance(ref.split(), hyp.split())
            total_errors += e
            if attribute(decoder, lp, ref, hyp) != "lm":
                continue
            oov = unknown(decoder, ref)
            part = "oov" if oov else "known"
            errors[part] += e
            utts[part] += 1
            if len(examples) < 12:
                examples.append({"ref": ref, "hyp": hyp, "unknown": oov})
        row = {
            "set": name,
            "all_word_errors": total_errors,
            "lm_kind_errors": errors,
            "lm_kind_utterances": utts,
            "examples": examples,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    (work / "lm_kind.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
