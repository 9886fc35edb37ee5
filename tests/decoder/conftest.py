"""Tiny real language models (ARPA files KenLM loads directly) and log-prob helpers."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from decoder.alphabet import Alphabet
from decoder.beam import DecoderConfig
from decoder.lm import CHAR_SPACE, KenLM

TINY = Alphabet((" ", "a", "b"))


def write_arpa(path: Path, unigrams: dict[str, float], bigrams: dict[str, float]) -> Path:
    """A bigram ARPA: unigrams {word: log10 p} (backoff -0.3), bigrams {"w1 w2": log10 p}."""
    lines = ["\\data\\", f"ngram 1={len(unigrams)}", f"ngram 2={len(bigrams)}", "", "\\1-grams:"]
    lines += [f"{p}\t{w}\t-0.3" if w != "</s>" else f"{p}\t{w}" for w, p in unigrams.items()]
    lines += ["", "\\2-grams:"]
    lines += [f"{p}\t{ws}" for ws, p in bigrams.items()]
    lines += ["", "\\end\\", ""]
    path.write_text("\n".join(lines))
    return path


WORDS = {"<s>": -99.0, "</s>": -1.0, "<unk>": -3.0, "a": -0.7, "b": -0.9, "ab": -0.6, "ba": -1.2}
WORD_BIGRAMS = {"<s> ab": -0.2, "ab ba": -0.3, "ba </s>": -0.1, "a b": -0.5, "<s> a": -0.4}


@pytest.fixture(scope="session")
def word_lm(tmp_path_factory: pytest.TempPathFactory) -> KenLM:
    path = write_arpa(tmp_path_factory.mktemp("lm") / "word.arpa", WORDS, WORD_BIGRAMS)
    return KenLM(path, unit="word")


@pytest.fixture(scope="session")
def char_lm(tmp_path_factory: pytest.TempPathFactory) -> KenLM:
    chars = {"<s>": -99.0, "</s>": -0.8, "<unk>": -2.0, "a": -0.5, "b": -0.6, CHAR_SPACE: -0.7}
    pairs = {"a b": -0.2, "b a": -0.3, f"b {CHAR_SPACE}": -0.4, f"{CHAR_SPACE} a": -0.3}
    path = write_arpa(tmp_path_factory.mktemp("lm") / "char.arpa", chars, pairs)
    return KenLM(path, unit="char")


def log_softmax(x: np.ndarray) -> np.ndarray:
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def spell(path: str, alphabet: Alphabet, p: float = 0.9) -> np.ndarray:
    """Log-probs [T, V] whose frame t shows path[t] with probability p ('_' = blank)."""
    lp = np.full((len(path), alphabet.size), np.log((1 - p) / (alphabet.size - 1)))
    for t, ch in enumerate(path):
        lp[t, 0 if ch == "_" else alphabet.id_of(ch)] = np.log(p)
    return lp


def rare_word_louder(tmp_path: Path) -> tuple[Alphabet, KenLM, np.ndarray]:
    """Two words, "ac" (common) and "bc" (rare), that differ in their first letter only, the
    rare one's a little louder: a one-beam search keeps "ac" only if it weighs the words'
    likelihood before they end. (alphabet, LM, log-probs [3, 5])."""
    unigrams = {"<s>": -99.0, "</s>": -0.1, "<unk>": -9.0, "ac": -0.05, "bc": -4.0}
    lm = KenLM(write_arpa(tmp_path / "lm.arpa", unigrams, {}))
    probs = [[0.02, 0.02, 0.46, 0.5, 0.0], [0.9, 0.02, 0.02, 0.02, 0.04], [0.02] * 4 + [0.92]]
    return Alphabet((" ", "a", "b", "c")), lm, log_softmax(np.log(np.array(probs) + 1e-12))


def brute_force(lp: np.ndarray, lm: KenLM | None, cfg: DecoderConfig) -> dict[str, float]:
    """Q of every text over TINY: CTC mass summed over all paths (spaces normalised), plus the
    LM's side; exponential in the frames, so for a handful of them."""
    mass: dict[str, float] = {}
    for path in itertools.product(range(lp.shape[1]), repeat=lp.shape[0]):
        ids = [c for i, c in enumerate(path) if c and (i == 0 or c != path[i - 1])]
        text = " ".join(TINY.decode(ids).split())
        mass[text] = float(
            np.logaddexp(mass.get(text, -np.inf), lp[np.arange(len(path)), path].sum())
        )
    return {text: ac + lm_side(text, lm, cfg) for text, ac in mass.items()}


def lm_side(text: str, lm: KenLM | None, cfg: DecoderConfig) -> float:
    """What the search adds to a text's CTC mass: the LM, the bonus, unknown-word penalties."""
    tokens = (
        text.split() if lm is None or lm.unit == "word" else list(text.replace(" ", CHAR_SPACE))
    )
    if lm is None:
        return cfg.beta * len(tokens)
    state, total = lm.begin(), 0.0
    for token in tokens:
        score, state, known = lm.score(state, token)
        total += cfg.alpha * score + cfg.beta + (0.0 if known else cfg.unk_penalty)
    return total + cfg.alpha * lm.finish(state)


# a search that prunes nothing over TINY's few frames: every hypothesis scores its exact Q
WIDE = DecoderConfig(
    alpha=0.7,
    beta=0.4,
    beam_width=100_000,
    cutoff_prob=1.0,
    cutoff_top_n=64,
    score_threshold=np.inf,
    unk_penalty=-2.0,
    nbest=1000,
)

# five frames of log-probs over TINY, few enough for `brute_force`
tiny_log_probs = arrays(np.float64, (5, TINY.size), elements=st.floats(-6, 6)).map(log_softmax)
