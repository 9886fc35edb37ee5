"""A request's hotwords as the decoder takes them: `/v1/stream`'s `hotwords`, `/vosk`'s
`phrase_list` and the phrases of a REST transcription's `prompt`.

Clients write names as people do ("Dr. Smith", "R2D2"); the decoder spells transcript text.
So every entry is normalised as transcripts are (`models/text.py`): "doctor smith", "r two
d two". An entry with nothing left to say once normalised is refused alone: the stream goes
on without it, and the transport tells the client which entry it was.

Written transcripts (server/written.py) keep an entry's own capitals ("iPhone", "Smith")
wherever its words are written: `casing`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from models.text import ABBREVIATIONS, normalise_phrase

MAX_PROMPT_PHRASES = 100  # as many as a stream's `hotwords` may hold
_PROMPT_BREAKS = re.compile(r"[,;:\n]")  # what separates a prompt's phrases


@dataclass(frozen=True)
class Hotwords:
    phrases: tuple[str, ...]  # normalised, each once, in the order given
    refused: tuple[str, ...]  # entries as given that normalise to nothing
    # normalised word -> the entry's written form, where an entry writes it with capitals
    casing: Mapping[str, str] = field(default_factory=dict)

    def refusal(self, entry: str, field: str) -> str:
        """What to tell the client of one refused entry (`field`: where it was given)."""
        return (
            f"{field}: {entry!r} has nothing the model can spell once normalised as "
            "transcripts are (letters, digits, words); it is left out, the rest are used"
        )


NO_HOTWORDS = Hotwords((), ())


def normalise_hotwords(entries: Sequence[str], free_text: bool = False) -> Hotwords:
    """Each entry as transcript text, those with nothing to say set apart; with
    `free_text`, the entries are pieces of sentences (a prompt's), whose first words'
    capitals say nothing of the word."""
    phrases: list[str] = []
    refused: list[str] = []
    casing: dict[str, str] = {}
    for entry in entries:
        phrase = normalise_phrase(entry)
        if not phrase:
            refused.append(entry)
            continue
        phrases.append(phrase)
        for word, form in hotword_casing(entry, phrase, free_text).items():
            casing.setdefault(word, form)  # the first entry's capitals win
    return Hotwords(tuple(dict.fromkeys(phrases)), tuple(refused), casing)


def hotword_casing(entry: str, phrase: str, free_text: bool = False) -> dict[str, str]:
    """The capitals an entry gives its words: {normalised word: as written} for each of its
    tokens (surrounding punctuation stripped) that lower-cases to exactly a word of its
    normalised `phrase` and has a capital: 'iPhone' -> {'iphone': 'iPhone'}, 'Dr. Smith' ->
    {'smith': 'Smith'} ('dr' is not 'doctor'). A lower-case token says nothing of case, so
    it leaves the word to the punctuator (capitalised where a sentence starts), and so does,
    in `free_text`, a capitalised token that starts a sentence ('The meeting ...')."""
    words = set(phrase.split())
    casing: dict[str, str] = {}
    sentence_start = True
    for token in entry.split():
        form = token.strip(string.punctuation)
        opening = free_text and sentence_start and form == form.capitalize()
        if form.lower() in words and form != form.lower() and not opening:
            casing.setdefault(form.lower(), form)
        sentence_start = _ends_sentence(token)
    return casing


def _ends_sentence(token: str) -> bool:
    """'today.' and 'why?' end a sentence; 'Dr.' and 'J.' do not."""
    stripped = token.rstrip("\"')]")
    if stripped.endswith(("?", "!")):
        return True
    word = stripped.lstrip("\"'([")
    return word.endswith(".") and word.lower() not in ABBREVIATIONS and len(word) > 2


def merged(*hotwords: Hotwords) -> Hotwords:
    """Several lists as one: phrases once each in order, the first list's capitals first."""
    casing: dict[str, str] = {}
    for h in reversed(hotwords):
        casing.update(h.casing)
    return Hotwords(
        tuple(dict.fromkeys(p for h in hotwords for p in h.phrases)),
        tuple(r for h in hotwords for r in h.refused),
        casing,
    )


def prompt_hotwords(prompt: str) -> Hotwords:
    """The phrases of a transcription request's `prompt` (separated by commas, semicolons,
    colons or lines), each normalised: OpenAI's prompt names words a file holds, and here
    they are favoured as hotwords. A piece with nothing to say is skipped (the prompt is
    free text); ValueError when there are more phrases than a stream's hotwords may be."""
    pieces = [p for p in _PROMPT_BREAKS.split(prompt) if p.strip()]
    hotwords = normalise_hotwords(pieces, free_text=True)
    if len(hotwords.phrases) > MAX_PROMPT_PHRASES:
        raise ValueError(
            f"prompt: {len(hotwords.phrases)} phrases; at most {MAX_PROMPT_PHRASES} become "
            "hotwords (separate them with commas)"
        )
    return Hotwords(hotwords.phrases, (), hotwords.casing)  # the prompt is free text
