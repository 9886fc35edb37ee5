"""A request's hotwords as the decoder takes them: `/v1/stream`'s `hotwords`, `/vosk`'s
`phrase_list` and the phrases of a REST transcription's `prompt`.

Clients write names as people do ("Dr. Smith", "R2D2"); the decoder spells transcript text.
So every entry is normalised as transcripts are (`models/text.py`): "doctor smith", "r two
d two". An entry with nothing left to say once normalised is refused alone: the stream goes
on without it, and the transport tells the client which entry it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from models.text import normalise_phrase

MAX_PROMPT_PHRASES = 100  # as many as a stream's `hotwords` may hold
_PROMPT_BREAKS = re.compile(r"[,;:\n]")  # what separates a prompt's phrases


@dataclass(frozen=True)
class Hotwords:
    phrases: tuple[str, ...]  # normalised, each once, in the order given
    refused: tuple[str, ...]  # entries as given that normalise to nothing

    def refusal(self, entry: str, field: str) -> str:
        """What to tell the client of one refused entry (`field`: where it was given)."""
        return (
            f"{field}: {entry!r} has nothing the model can spell once normalised as "
            "transcripts are (letters, digits, words); it is left out, the rest are used"
        )


def normalise_hotwords(entries: Sequence[str]) -> Hotwords:
    """Each entry as transcript text, those with nothing to say set apart."""
    phrases: list[str] = []
    refused: list[str] = []
    for entry in entries:
        phrase = normalise_phrase(entry)
        if phrase:
            phrases.append(phrase)
        else:
            refused.append(entry)
    return Hotwords(tuple(dict.fromkeys(phrases)), tuple(refused))


def prompt_hotwords(prompt: str) -> tuple[str, ...]:
    """The phrases of a transcription request's `prompt` (separated by commas, semicolons,
    colons or lines), each normalised: OpenAI's prompt names words a file holds, and here
    they are favoured as hotwords. A piece with nothing to say is skipped (the prompt is
    free text); ValueError when there are more phrases than a stream's hotwords may be."""
    pieces = [p for p in _PROMPT_BREAKS.split(prompt) if p.strip()]
    phrases = normalise_hotwords(pieces).phrases
    if len(phrases) > MAX_PROMPT_PHRASES:
        raise ValueError(
            f"prompt: {len(phrases)} phrases; at most {MAX_PROMPT_PHRASES} become hotwords "
            "(separate them with commas)"
        )
    return phrases
