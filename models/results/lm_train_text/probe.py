"""Which texts beside the shipped LM's help? Each candidate LM decodes the same log-probs.

Usage (repository root): python models/results/lm_train_text/probe.py WORK LM_DIR...

WORK holds tts_dev.pkl and her_dev.pkl from `models/results/rescore/nbest.py` (models/default's
network over TTS dev and her dev prompts, speaker adaptation on). Each LM_DIR holds a
`harken build-lm` output with models/default's decoder.json copied in, so that only the LM
differs (the shipped weight and bonus, not re-tuned). Prints beam WER per set.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from models.results.rescore.nbest import load_outputs


def main(work: Path, lm_dirs: list[str]) -> None:
    torch.set_num_threads(1)
    sets = load_outputs(work)
    first = sets["tts_dev"]
    alphabet = Alphabet.from_list(first.config.alphabet)
    for lm_dir in lm_dirs:
        decoder = load_decoder(Path(lm_dir), alphabet, first.config.frame_seconds)
        row: dict[str, str | float] = {"lm": lm_dir}
        for name, out in sets.items():
            hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
            row[name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
