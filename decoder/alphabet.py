"""The output symbols of the acoustic model, and text <-> id mapping.

Contract with the acoustic model (a bundle's config.json): `"alphabet"` lists the symbols
without the blank; model output index 0 is the CTC blank and index i + 1 is alphabet[i].
Text reaching the decoder is already normalised (lower case a-z, space, apostrophe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

BLANK = 0  # model output index of the CTC blank
SPACE = " "  # the word separator symbol
ENGLISH = (" ", "'", *"abcdefghijklmnopqrstuvwxyz")  # the default English alphabet, V = 29


@dataclass(frozen=True)
class Alphabet:
    """Symbols of output indices 1..V-1 (index 0 is the blank)."""

    symbols: tuple[str, ...]  # alphabet[i] is model output i + 1
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.symbols or any(len(s) != 1 for s in self.symbols):
            raise ValueError(f"alphabet symbols must be single characters, got {self.symbols!r}")
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError(f"alphabet has duplicate symbols: {self.symbols!r}")
        if SPACE not in self.symbols:
            raise ValueError("alphabet must contain the space ' ' (the word separator)")
        index = {s: i + 1 for i, s in enumerate(self.symbols)}
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_list(cls, symbols: Sequence[str]) -> Alphabet:
        """From a bundle's config.json `"alphabet"` list (blank excluded)."""
        return cls(tuple(symbols))

    @property
    def size(self) -> int:
        """V: the number of model outputs, blank included."""
        return len(self.symbols) + 1

    @property
    def space(self) -> int:
        """Model output index of the space."""
        return self._index[SPACE]

    def id_of(self, symbol: str) -> int:
        """Model output index of one symbol."""
        try:
            return self._index[symbol]
        except KeyError:
            raise ValueError(f"{symbol!r} is not in the alphabet {self.symbols!r}") from None

    def encode(self, text: str) -> npt.NDArray[np.int64]:
        """Ids of a normalised text (no blanks)."""
        return np.array([self.id_of(c) for c in text], dtype=np.int64)

    def decode(self, ids: Sequence[int] | npt.NDArray[np.int64]) -> str:
        """Text of a sequence of non-blank ids."""
        return "".join(self.symbols[int(i) - 1] for i in ids)
