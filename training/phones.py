"""Phone targets: a second CTC head learns each utterance's phones from a lower layer.

The output layer spells letters, and English spelling is far from sound: the network must
learn both how a voice sounds and how English spells it, from about twenty hours of speech.
A CTC head on a lower recurrent layer that must name the utterance's phones (from a
pronouncing dictionary, CMUdict's format) asks that layer for what sound alone carries, the
hierarchical multitask objective of Fernandez et al. (2007) and Krishna et al. (2018) for CTC
models. Training only: the head is checkpointed, never exported, and the served network is
unchanged in shape and cost. An utterance with a word the dictionary lacks adds no phone loss.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.manifest import Utterance

# ARPAbet's 39 phones, CMUdict's inventory with the stress marks taken off; 0 is CTC's blank
PHONES = (
    "AA",
    "AE",
    "AH",
    "AO",
    "AW",
    "AY",
    "B",
    "CH",
    "D",
    "DH",
    "EH",
    "ER",
    "EY",
    "F",
    "G",
    "HH",
    "IH",
    "IY",
    "JH",
    "K",
    "L",
    "M",
    "N",
    "NG",
    "OW",
    "OY",
    "P",
    "R",
    "S",
    "SH",
    "T",
    "TH",
    "UH",
    "UW",
    "V",
    "W",
    "Y",
    "Z",
    "ZH",
)
_INDEX = {p: i + 1 for i, p in enumerate(PHONES)}
_ALTERNATE = re.compile(r"^(.+)\(\d+\)$")  # CMUdict's second and later pronunciations: word(2)


def read_lexicon(path: str | Path) -> dict[str, tuple[int, ...]]:
    """A pronouncing dictionary, one `word PH1 PH2 ...` per line (CMUdict's format, as
    PocketSphinx ships it): each word's first pronunciation as phone ids (stress dropped).
    Comment lines (`;;;`) and later pronunciations (`word(2)`) are skipped; a phone outside
    ARPAbet's 39 is refused with its line, since it would silently teach a wrong target."""
    out: dict[str, tuple[int, ...]] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            parts = line.split("#", 1)[0].split()
            if not parts or parts[0].startswith(";;;") or _ALTERNATE.match(parts[0]):
                continue
            word, phones = parts[0].lower(), [p.rstrip("012") for p in parts[1:]]
            unknown = [p for p in phones if p not in _INDEX]
            if unknown or not phones:
                raise ValueError(
                    f"{path}:{number}: {word!r} has "
                    + (f"phone {unknown[0]!r} outside ARPAbet" if unknown else "no phones")
                )
            out.setdefault(word, tuple(_INDEX[p] for p in phones))
    if not out:
        raise ValueError(f"{path} holds no pronunciations")
    return out


def phone_targets(
    utterances: Sequence[Utterance], lexicon: dict[str, tuple[int, ...]]
) -> list[tuple[int, ...] | None]:
    """Each utterance's phones, its words' pronunciations in order; None where a word is not
    in the lexicon (a guessed pronunciation would be a wrong target more often than not)."""
    out: list[tuple[int, ...] | None] = []
    for u in utterances:
        words = u.text.split()
        if not words or any(w not in lexicon for w in words):
            out.append(None)
            continue
        out.append(tuple(p for w in words for p in lexicon[w]))
    return out


class PhoneHead(nn.Module):
    """A linear map from a recurrent layer's output to phone log-probabilities (and blank)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.out = nn.Linear(hidden, len(PHONES) + 1)

    def forward(self, hidden: Tensor) -> Tensor:
        """[B, T, H] -> log-probs [B, T, 40] (float32, also under autocast: CTC needs it)."""
        return F.log_softmax(self.out(hidden).float(), dim=-1)


def phone_losses(
    log_probs: Tensor, targets: Sequence[tuple[int, ...] | None], out_lengths: Tensor
) -> tuple[Tensor, int]:
    """Per-utterance phone CTC loss [B] (summed over frames, CTC's own scale), 0 where an
    utterance has no phones, and how many had them."""
    have = [i for i, t in enumerate(targets) if t]
    chosen = [t for t in targets if t]
    losses = log_probs.new_zeros(len(targets))
    if not have:
        return losses, 0
    index = torch.tensor(have, device=log_probs.device)
    labels = torch.tensor([p for t in chosen for p in t], device=log_probs.device)
    label_lengths = torch.tensor([len(t) for t in chosen], device=log_probs.device)
    ctc = F.ctc_loss(
        log_probs[index].transpose(0, 1),
        labels,
        out_lengths[index],
        label_lengths,
        blank=0,
        reduction="none",
        zero_infinity=True,
    )
    return losses.index_put((index,), ctc), len(have)
