"""The decoders we measure ourselves against, behind one signature: log-probs [T, V] -> text.

Both use the same KenLM binary and unigram list as ours, and the same alpha/beta on the
same scale (natural-log LM scores; flashlight's KenLM returns log10, so its LM weight is
alpha * ln 10). They come from the optional `bench` extra and are imported only here.

- pyctcdecode 0.5.0: `decode` at beam 100 with its default pruning (beam_prune_logp -10,
  token_min_logp -5).
- flashlight-text 0.0.7: with a word LM, its LexiconDecoder over the unigram list (the
  lexicon-free decoder would query a word LM with single characters), each word spelt
  with a closing space as wav2letter lexicons are; with a character LM, its
  LexiconFreeDecoder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.lm import CHAR_SPACE

Decode = Callable[[npt.NDArray[np.float32]], str]


def pyctcdecode_decoder(
    alphabet: Alphabet,
    lm_path: Path,
    unigrams: Sequence[str],
    alpha: float,
    beta: float,
    beam_width: int = 100,
) -> Decode:
    from pyctcdecode.decoder import build_ctcdecoder

    labels = ["", *alphabet.symbols]
    decoder = build_ctcdecoder(labels, str(lm_path), list(unigrams), alpha=alpha, beta=beta)

    def decode(log_probs: npt.NDArray[np.float32]) -> str:
        return " ".join(
            str(decoder.decode(log_probs.astype(np.float64), beam_width=beam_width)).split()
        )

    return decode


def flashlight_decoder(
    alphabet: Alphabet,
    lm_path: Path,
    unigrams: Sequence[str],
    alpha: float,
    beta: float,
    unit: str = "word",
    beam_size: int = 100,
    beam_threshold: float = 25.0,
) -> Decode:
    from flashlight.lib.text import decoder as fl
    from flashlight.lib.text.dictionary import Dictionary, create_word_dict

    tokens = ["<blank>", *(CHAR_SPACE if s == " " else s for s in alphabet.symbols)]
    token_dict = Dictionary(tokens)
    space = alphabet.space
    if unit == "char":
        lm = fl.KenLM(str(lm_path), token_dict)
        opts = fl.LexiconFreeDecoderOptions(
            beam_size,
            alphabet.size,
            beam_threshold,
            alpha * math.log(10),
            0.0,
            False,
            fl.CriterionType.CTC,
        )
        return _fl_run(fl.LexiconFreeDecoder(opts, lm, space, 0, []), alphabet, None)
    lexicon = {w: [list(w)] for w in unigrams if all(c in alphabet.symbols for c in w)}
    word_dict = create_word_dict({**lexicon, "<unk>": [[]]})  # it needs an <unk> entry
    lm = fl.KenLM(str(lm_path), word_dict)
    trie = fl.Trie(alphabet.size, space)
    start = lm.start(False)
    for word, [spelling] in lexicon.items():
        index = word_dict.get_index(word)
        ids = [alphabet.id_of(c) for c in spelling] + [space]  # words end in a space
        trie.insert(ids, index, lm.score(start, index)[1])
    trie.smear(fl.SmearingMode.MAX)
    opts = fl.LexiconDecoderOptions(
        beam_size,
        alphabet.size,
        beam_threshold,
        alpha * math.log(10),
        beta,
        -math.inf,
        0.0,
        False,
        fl.CriterionType.CTC,
    )
    unk = word_dict.get_index("<unk>")
    decoder = fl.LexiconDecoder(opts, trie, lm, space, 0, unk, [], False)
    return _fl_run(decoder, alphabet, word_dict, closing_space=space)


def _fl_run(decoder: Any, alphabet: Alphabet, word_dict: Any, closing_space: int = -1) -> Decode:
    """With a lexicon, every word's spelling ends in a space, so one certain space frame is
    appended to let the last word end too."""

    def decode(log_probs: npt.NDArray[np.float32]) -> str:
        emissions = np.asarray(log_probs, dtype=np.float32)
        if closing_space >= 0:
            tail = np.full((1, emissions.shape[1]), -1e4, dtype=np.float32)
            tail[0, closing_space] = 0.0
            emissions = np.concatenate([emissions, tail])
        emissions = np.ascontiguousarray(emissions)
        best = decoder.decode(emissions.ctypes.data, emissions.shape[0], emissions.shape[1])[0]
        if word_dict is not None:
            return " ".join(word_dict.get_entry(w) for w in best.words if w >= 0)
        ids = [
            t for i, t in enumerate(best.tokens) if t > 0 and (i == 0 or t != best.tokens[i - 1])
        ]
        return " ".join(alphabet.decode(ids).split())

    return decode
