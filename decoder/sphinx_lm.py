"""PocketSphinx's binary n-gram format ("Trie Language Model") read into ARPA for KenLM.

PocketSphinx ships a general US English trigram (en-us.lm.bin: 72,547 words, 3.7 M n-grams)
in a bit-packed trie of its own; its writer (`NGramModel.write`) crashes on that file, since
the header counts a few more bigrams than the trie holds and the writer trusts the header.
This reader follows the trie's own pointers instead, with numpy, in a couple of seconds.

The layout (pocketsphinx src/lm/lm_trie.c, lm_trie_quant.c, bitarr.c): the header and order,
the n-gram counts (uint32 each), an int, the quantiser's tables (float32: for each middle
order 65,536 probabilities then 65,536 backoffs, then 65,536 probabilities of the longest
order), the unigrams (float32 prob, float32 backoff, uint32 first child; one extra at the end),
then for each order above one an array of bit-packed entries (word index; for the middle
orders a 16-bit backoff code, a 16-bit probability code and the first child's index; for the
longest a 16-bit probability code), sized by the header's counts, then the words, NUL-separated.
A path from the root reads an n-gram last word first. Scores are in units of log base 1.0001.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

MAGIC = b"Trie Language Model"
LOG10_OF_UNIT = math.log10(1.0001)  # PocketSphinx's default log base
_QUANT_BITS = 16
_TABLE = 1 << _QUANT_BITS

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Order:
    """The n-grams of one order as parallel arrays: word indices in ARPA order (first word
    first), log10 probabilities and (below the top order) log10 backoffs."""

    words: I64  # [count, n]
    prob: F64
    backoff: F64 | None


@dataclass(frozen=True)
class SphinxLM:
    vocabulary: list[str]
    orders: list[Order]  # unigrams first


def is_sphinx_trie(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def read_sphinx_trie(path: Path) -> SphinxLM:
    """Every n-gram of a PocketSphinx trie binary; ValueError if the file is not one."""
    raw = Path(path).read_bytes()
    if not raw.startswith(MAGIC):
        raise ValueError(f"{path} is not a PocketSphinx trie LM (no {MAGIC.decode()!r} header)")
    pos = len(MAGIC)
    order = raw[pos]
    pos += 1
    if not 2 <= order <= 5:
        raise ValueError(f"{path}: n-gram order {order} is outside 2..5")
    counts = np.frombuffer(raw, "<u4", order, pos).astype(np.int64)
    pos += 4 * order + 4  # the counts, then an unused int
    n_tables = 2 * (order - 2) + 1
    tables = np.frombuffer(raw, "<f4", n_tables * _TABLE, pos).reshape(n_tables, _TABLE)
    pos += tables.nbytes
    unigram = np.dtype([("prob", "<f4"), ("backoff", "<f4"), ("next", "<u4")])
    ug = np.frombuffer(raw, unigram, int(counts[0]) + 1, pos)
    pos += ug.nbytes
    word_bits = int(counts[0]).bit_length()
    layouts = []  # (entries in the header, bits per entry, bits of the child pointer)
    for k in range(1, order):
        next_bits = int(counts[k + 1]).bit_length() if k < order - 1 else 0
        quant = 2 * _QUANT_BITS if k < order - 1 else _QUANT_BITS
        layouts.append((int(counts[k]), word_bits + quant + next_bits, next_bits))
    sizes = [((1 + n) * bits + 7) // 8 + 8 for n, bits, _ in layouts]
    mem = np.frombuffer(raw, np.uint8, sum(sizes), pos)
    pos += sum(sizes)
    (k_bytes,) = np.frombuffer(raw, "<u4", 1, pos)
    pos += 4
    vocabulary = [w.decode("latin-1") for w in raw[pos : pos + int(k_bytes)].split(b"\0")[:-1]]
    if len(vocabulary) != counts[0]:
        raise ValueError(f"{path}: {len(vocabulary)} words for {counts[0]} unigrams")

    paths = np.arange(counts[0])[:, None]  # trie paths of the previous order, root first
    orders = [Order(paths, _log10(ug["prob"][:-1]), _log10(ug["backoff"][:-1]))]
    bounds = ug["next"].astype(np.int64)  # children of entry i: bounds[i]..bounds[i + 1]
    start = 0
    for k, ((_, bits, next_bits), size) in enumerate(zip(layouts, sizes, strict=True), start=1):
        block = mem[start : start + size]
        start += size
        n = int(bounds[-1])  # the trie may hold fewer entries than the header counts
        at = np.arange(n + 1, dtype=np.int64) * bits
        word = _read_bits(block, at[:-1], word_bits)
        parent = np.repeat(np.arange(len(paths)), np.diff(bounds))
        paths = np.concatenate([paths[parent], word[:, None]], axis=1)
        if next_bits:
            table = tables[2 * (k - 1)]
            codes = at[:-1] + word_bits  # a backoff code, then a probability code
            backoff = tables[2 * (k - 1) + 1][_read_bits(block, codes, _QUANT_BITS)]
            prob = table[_read_bits(block, codes + _QUANT_BITS, _QUANT_BITS)]
            bounds = _read_bits(block, at + word_bits + 2 * _QUANT_BITS, next_bits)
            orders.append(Order(paths[:, ::-1].copy(), _log10(prob), _log10(backoff)))
        else:
            prob = tables[-1][_read_bits(block, at[:-1] + word_bits, _QUANT_BITS)]
            orders.append(Order(paths[:, ::-1].copy(), _log10(prob), None))
    return SphinxLM(vocabulary, orders)


def _log10(units: npt.NDArray[np.float32]) -> F64:
    return units.astype(np.float64) * LOG10_OF_UNIT


def _read_bits(mem: npt.NDArray[np.uint8], offsets: I64, bits: int) -> I64:
    """The `bits`-bit little-endian fields at bit offsets (at most 25 bits, as pocketsphinx)."""
    byte = offsets >> 3
    value = np.zeros(len(offsets), dtype=np.uint64)
    for i in range(4):
        value |= mem[byte + i].astype(np.uint64) << np.uint64(8 * i)
    value >>= (offsets & 7).astype(np.uint64)
    return (value & np.uint64((1 << bits) - 1)).astype(np.int64)


def write_arpa(lm: SphinxLM, out: Path) -> None:
    """The model as an ARPA file KenLM's build_binary reads."""
    words = lm.vocabulary
    with open(out, "w", encoding="utf-8") as f:
        f.write("\\data\\\n")
        for n, o in enumerate(lm.orders, start=1):
            f.write(f"ngram {n}={len(o.prob)}\n")
        for n, o in enumerate(lm.orders, start=1):
            f.write(f"\n\\{n}-grams:\n")
            probs = o.prob.tolist()
            backoffs = o.backoff.tolist() if o.backoff is not None else None
            for i, row in enumerate(o.words.tolist()):
                text = " ".join(words[w] for w in row)
                tail = f"\t{backoffs[i]:.4f}" if backoffs is not None else ""
                f.write(f"{probs[i]:.4f}\t{text}{tail}\n")
        f.write("\n\\end\\\n")
