"""Punctuation and capitals for a transcript's words: written text from spoken words.

The recogniser emits normalised words ("hello my name is john i live in new york"); users
of OpenAI-style APIs expect written sentences ("Hello, my name is John. I live in New
York."). A small network decides, for each word, the mark after it (none, comma, period,
question mark) and its case (lower, Capitalised, UPPER), reading the words before it
through a unidirectional GRU and `lookahead` words after it. So a word's written form
depends only on the words up to `lookahead` after it: on a stream it is decided as soon as
those are stable, and never changes afterwards, which keeps streamed text append-only and
equal to the text written from the whole transcript at once.

It runs on numpy, one word at a time, so a long transcript costs time linear in its words
and streaming and offline take the same arithmetic path. `training/punctuation.py` trains
it; the bundle carries it as `punctuation.safetensors` + `punctuation.json`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file, save_file

F32 = npt.NDArray[np.float32]
MARKS = ("", ",", ".", "?")  # what may follow a word; '!' is written as '.', ';' and ':' as ','
CASES = ("lower", "title", "upper")
SENTENCE_END = frozenset(".?")
PAD, UNK, END = 0, 1, 2  # word ids of padding, an unknown word, and the end of a transcript
SPECIALS = ("<pad>", "<unk>", "<end>")
WEIGHTS, META = "punctuation.safetensors", "punctuation.json"
FORMAT = "harken-punctuation"


@dataclass(frozen=True)
class PunctuationConfig:
    """Sizes of the network (`training/punctuation.py` builds the same shapes in torch)."""

    vocab: int  # word ids, SPECIALS included
    suffix_buckets: int = 512  # hashed last-three-letters, so unknown words keep a clue
    dim: int = 96  # word embedding
    hidden: int = 192  # the GRU reading left to right
    ffn: int = 256  # the classifier over the states of a word and its lookahead
    lookahead: int = 3  # words after a word that its marks and case may depend on


@dataclass(frozen=True)
class WrittenWord:
    """A word as written: its cased form and the mark after it ('' when none)."""

    word: str
    mark: str = ""

    def __str__(self) -> str:
        return self.word + self.mark


def join(words: Sequence[WrittenWord]) -> str:
    return " ".join(str(w) for w in words)


def suffix_bucket(word: str, buckets: int) -> int:
    """A stable hash of the word's last three letters (crc32: the same in every process)."""
    return zlib.crc32(word[-3:].encode()) % buckets


@dataclass
class Reading:
    """Where the network stands in one transcript: the words fed and the GRU state after
    each, so that feeding more words continues rather than restarts."""

    words: list[str] = field(default_factory=list)
    states: list[F32] = field(default_factory=list)  # [hidden] after each word fed
    ended: bool = False  # the end marker has been fed (lookahead padding)


class Punctuator:
    """The trained network and its vocabulary; stateless between calls (state is a Reading)."""

    def __init__(
        self,
        config: PunctuationConfig,
        vocab: Sequence[str],
        weights: dict[str, F32],
        mixed: dict[str, str] | None = None,
    ) -> None:
        if len(vocab) != config.vocab or tuple(vocab[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a punctuation vocabulary of {config.vocab} starting {SPECIALS}")
        self.config = config
        self.vocab = list(vocab)
        self._ids = {w: i for i, w in enumerate(vocab)}
        self.mixed = dict(mixed or {})  # 'iphone' -> 'iPhone': forms neither title nor upper
        self.weights = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
        self._check_shapes()

    # -- files -----------------------------------------------------------------------------

    @classmethod
    def load(cls, directory: Path) -> Punctuator | None:
        """The punctuator a bundle carries, or None when it carries none."""
        meta_path = directory / META
        if not meta_path.is_file():
            return None
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{meta_path}: not a {FORMAT} file")
        config = PunctuationConfig(**meta["config"])
        weights = load_file(str(directory / WEIGHTS))
        return cls(config, meta["vocab"], weights, meta.get("mixed"))

    def save(self, directory: Path, provenance: dict[str, object] | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        half = {k: v.astype(np.float16) for k, v in self.weights.items()}  # half the bytes
        save_file(half, str(directory / WEIGHTS))
        meta = {
            "format": FORMAT,
            "config": self.config.__dict__,
            "vocab": self.vocab,
            "mixed": self.mixed,
            "provenance": provenance or {},
        }
        (directory / META).write_text(json.dumps(meta, indent=1) + "\n")

    def _check_shapes(self) -> None:
        want = weight_shapes(self.config)
        for name, shape in want.items():
            got = self.weights.get(name)
            if got is None or got.shape != shape:
                have = None if got is None else got.shape
                raise ValueError(f"punctuation weights: {name} should be {shape}, got {have}")

    # -- reading ---------------------------------------------------------------------------

    def word_id(self, word: str) -> int:
        return self._ids.get(word, UNK)

    def feed(self, reading: Reading, words: Sequence[str], end: bool = False) -> None:
        """Read `words` after those already read (and then the end marker, with `end`)."""
        if reading.ended:
            raise ValueError("this transcript has ended; start a new Reading")
        w = self.weights
        h = reading.states[-1] if reading.states else np.zeros(self.config.hidden, np.float32)
        tokens = [(self.word_id(x), x) for x in words]
        if end:
            tokens += [(END, "")] * self.config.lookahead
        for wid, text in tokens:
            x = w["embed"][wid] + w["suffix"][suffix_bucket(text, self.config.suffix_buckets)]
            h = _gru_step(x, h, w)
            reading.states.append(h)
        reading.words.extend(words)
        reading.ended = end

    def decided(self, reading: Reading) -> int:
        """How many of the reading's words have every word they depend on."""
        if reading.ended:
            return len(reading.words)
        return max(0, len(reading.words) - self.config.lookahead)

    def write(self, reading: Reading, start: int, stop: int) -> list[WrittenWord]:
        """Words [start, stop) as written (stop <= decided(reading)): the same for a given word
        whatever was read after its lookahead."""
        if stop > self.decided(reading):
            raise ValueError(f"word {stop - 1} is not decided yet")
        if start >= stop:
            return []
        scores = self._scores(reading, start, stop)
        marks = scores[:, : len(MARKS)].argmax(axis=1)
        cases = scores[:, len(MARKS) :].argmax(axis=1)
        prev_mark = self._previous_mark(reading, start)
        out = []
        for i, (m, c) in enumerate(zip(marks, cases, strict=True)):
            word = reading.words[start + i]
            sentence_start = start + i == 0 or prev_mark in SENTENCE_END
            out.append(WrittenWord(self._cased(word, CASES[c], sentence_start), MARKS[m]))
            prev_mark = MARKS[m]
        return out

    def _previous_mark(self, reading: Reading, start: int) -> str:
        if start == 0:
            return "."
        scores = self._scores(reading, start - 1, start)
        return MARKS[int(scores[0, : len(MARKS)].argmax())]

    def _scores(self, reading: Reading, start: int, stop: int) -> F32:
        """Logits [stop - start, marks + cases] from each word's state and its lookahead's."""
        w, k = self.weights, self.config.lookahead
        states = np.stack(reading.states[start : stop + k])  # decided: all are there
        windows = np.concatenate([states[j : j + stop - start] for j in range(k + 1)], axis=1)
        hidden = np.maximum(windows @ w["ffn.w"].T + w["ffn.b"], 0.0)
        return np.asarray(hidden @ w["out.w"].T + w["out.b"], np.float32)

    def _cased(self, word: str, case: str, sentence_start: bool) -> str:
        # an UPPER word is written Title: the recogniser spells acronyms as words ('fbi'),
        # and transcripts are read back with capitals as spelled letters ('FBI' -> 'f b i'),
        # which would change the words a written transcript normalises to
        if case != "lower" or sentence_start:
            mixed = self.mixed.get(word)
            return mixed if mixed else word[:1].upper() + word[1:]
        return word


def weight_shapes(c: PunctuationConfig) -> dict[str, tuple[int, ...]]:
    """Every weight the network reads, by name, with its shape (torch.nn.GRU's layout)."""
    h, outputs = c.hidden, len(MARKS) + len(CASES)
    return {
        "embed": (c.vocab, c.dim),
        "suffix": (c.suffix_buckets, c.dim),
        "gru.w_ih": (3 * h, c.dim),
        "gru.w_hh": (3 * h, h),
        "gru.b_ih": (3 * h,),
        "gru.b_hh": (3 * h,),
        "ffn.w": (c.ffn, h * (c.lookahead + 1)),
        "ffn.b": (c.ffn,),
        "out.w": (outputs, c.ffn),
        "out.b": (outputs,),
    }


def _gru_step(x: F32, h: F32, w: dict[str, F32]) -> F32:
    """torch.nn.GRU's cell: gates r, z, n in that order in w_ih / w_hh."""
    gi = w["gru.w_ih"] @ x + w["gru.b_ih"]
    gh = w["gru.w_hh"] @ h + w["gru.b_hh"]
    n_h = len(h)
    r = _sigmoid(gi[:n_h] + gh[:n_h])
    z = _sigmoid(gi[n_h : 2 * n_h] + gh[n_h : 2 * n_h])
    n = np.tanh(gi[2 * n_h :] + r * gh[2 * n_h :])
    return np.asarray((1.0 - z) * n + z * h, np.float32)


def _sigmoid(x: F32) -> F32:
    return np.asarray(1.0 / (1.0 + np.exp(-x)), np.float32)


def write_all(punctuator: Punctuator, words: Sequence[str]) -> list[WrittenWord]:
    """A whole transcript as written, ending with a sentence mark (offline use)."""
    reading = Reading()
    punctuator.feed(reading, words, end=True)
    return close_sentence(punctuator.write(reading, 0, len(words)))


def close_sentence(words: list[WrittenWord]) -> list[WrittenWord]:
    """A transcript that ends with the end of its audio ends its sentence there too."""
    if words and words[-1].mark not in SENTENCE_END:
        words[-1] = WrittenWord(words[-1].word, ".")
    return words
