"""Text normalisation and fortune sentence splitting: what the transcripts will say."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus import numbers
from corpus.fortunes import TextConfig, blocks, collect, fortune_files, is_art, split_sentences
from corpus.text import Dropped, normalise, normalise_phrase
from models.config import ALPHABET


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("In 1984 we left.", "in nineteen eighty four we left"),
        ("He came 3rd, then 21st.", "he came third then twenty first"),
        ("It costs $5.", "it costs five dollars"),
        ("Just $1 or $2.50 each", "just one dollar or two dollars fifty cents each"),
        ("They lost $3 million.", "they lost three million dollars"),
        ("Mr. Smith & Dr. Jones", "mister smith and doctor jones"),
        (
            "Born in 1905, died in the 1960s",
            "born in nineteen oh five died in the nineteen sixties",
        ),
        ("Pi is 3.14 and 1,000,000 is big", "pi is three point one four and one million is big"),
        ("Meet at 3:05 or 12:00", "meet at three oh five or twelve o'clock"),
        ("Half is 50% off", "half is fifty percent off"),
        ("I sold it to IBM.", "i sold it to i b m"),
        ("MORAL OF THE STORY: run", "moral of the story run"),
        ("Don't touch the dogs' bowls", "don't touch the dogs' bowls"),
        ("He said 'never' again", "he said never again"),
        ("\u201cCaf\u00e9\u201d \u2014 na\u00efve", "cafe naive"),
        ("e.g. the U.S.A. and J. R. R. Tolkien", "for example the u s a and j r r tolkien"),
    ],
)
def test_normalise_spells_out(raw: str, expected: str) -> None:
    assert normalise(raw).text == expected


def test_spoken_form_has_same_words_and_prosody() -> None:
    n = normalise("Well, IBM said so!")
    assert n.text == "well i b m said so"
    assert n.spoken == "well, I B M said so!"
    assert n.spoken.lower().replace(",", "").replace("!", "") == n.text


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("Run x = y + 1;", "unspeakable_char"),
        ("Buy a 4x4 now", "mixed_alnum"),
        ("Use mp3 files", "mixed_alnum"),
        ("Call #5 <now>", "unspeakable_char"),
        ("The 2th one", "number_format"),
        ("...", "empty"),
    ],
)
def test_unspeakable_sentences_are_dropped_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(Dropped) as e:
        normalise(raw)
    assert e.value.reason == reason


def test_numbers() -> None:
    assert numbers.cardinal(0) == "zero"
    assert numbers.cardinal(115) == "one hundred fifteen"
    assert numbers.cardinal(2_000_001) == "two million one"
    assert numbers.ordinal(12) == "twelfth" and numbers.ordinal(40) == "fortieth"
    assert numbers.year(2000 + 19) == "twenty nineteen" and numbers.year(1800) == "eighteen hundred"


FORTUNE = """A black cat crossing your path signifies that the animal is going somewhere.
\t\t-- Groucho Marx
%
Q:\tWhat did Mr. Smith say?  He said nothing at all.
A:\tNothing much, as usual.
%
   /\\_/\\
  ( o.o )  ====
   > ^ <
%
Assume a virtue, if you have it not.  -William Shakespeare
%
Short.
"""


def test_fortune_blocks_drop_attribution_labels_and_art(tmp_path: Path) -> None:
    entries = FORTUNE.split("%\n")
    assert blocks(entries[0]) == [
        "A black cat crossing your path signifies that the animal is going somewhere."
    ]
    assert blocks(entries[1])[0].startswith("What did Mr. Smith")
    assert is_art(entries[2]) and not is_art(entries[1])
    assert blocks(entries[3]) == ["Assume a virtue, if you have it not."]
    assert split_sentences(blocks(entries[1])[0]) == [
        "What did Mr. Smith say?",
        "He said nothing at all.",
    ]


def test_collect_counts_what_it_drops(tmp_path: Path) -> None:
    (tmp_path / "humor").write_text(FORTUNE)
    (tmp_path / "humor.dat").write_bytes(b"\x00\x01")
    (tmp_path / "off").mkdir()
    (tmp_path / "off" / "rude").write_text("Offensive text is never read here.\n%\n")
    files = fortune_files(tmp_path)
    assert [f.name for f in files] == ["humor"]
    sentences, counts = collect(files, TextConfig(min_words=3, max_words=30))
    texts = [s.text for s in sentences]
    assert "what did mister smith say" in texts
    assert counts["dropped_entry_art_or_code"] == 1
    assert counts["dropped_too_short"] == 1  # "Short."
    assert counts["kept"] == len(sentences) == 5
    assert all(set(t) <= set(ALPHABET) for t in texts)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Dr. Smith", "doctor smith"),  # as a transcript says it
        ("R2D2", "r two d two"),  # a sentence would be dropped; a name is read as it can be
        ("h\u00e9llo", "hello"),
        ("C++ compiler", "c compiler"),  # a sign without a sound is left out
        ("?!", ""),  # nothing to say
        ("\U0001f642", ""),
    ],
)
def test_a_phrase_is_read_as_best_it_can_be(raw: str, expected: str) -> None:
    assert normalise_phrase(raw) == expected
