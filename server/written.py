"""Written transcripts: a segment's partials and final with punctuation and capitals.

The decoder spells normalised words ("eight of spades four of clubs"); a client that asks for
written text (REST and Realtime by default, `/v1/stream` and `/vosk` with `punctuate`) gets
them as the bundle's punctuator (models/punctuation.py) writes them: "Eight of spades, four
of clubs." Only case and marks change: the words, their count and their times stay.

A word's written form depends only on the words up to the punctuator's `lookahead` after it.
So of a partial's stable words (which no later audio changes) all but the last `lookahead`
are decided, and their written form is final: a partial's written `stable` only ever grows
and is a prefix of its `text` and of the final's, which keeps the transports' deltas
append-only. `text` goes on with the written decided words of the unstable tail, then the
tail's last words as recognised. One `SegmentWriter` reads a segment's stable words once
each, so a long file costs time linear in its words; the tail is read again on each partial
from the stable reading's last state, without changing it.

A client's hotwords keep the client's capitals ("iPhone") wherever the word is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from models.bundle import BundleError
from models.punctuation import (
    META,
    WEIGHTS,
    Punctuator,
    Reading,
    WrittenWord,
    close_sentence,
    join,
    write_all,
)
from server.protocol import Alternative, Final, Partial, Word

log = logging.getLogger("harken.server")


def load_punctuator(bundle: Path) -> Punctuator | None:
    """The bundle's punctuator, or None when it has none; a BundleError that names the file
    to fix when it cannot be loaded."""
    meta, weights, plain = bundle / META, bundle / WEIGHTS, f"or delete {META} to serve plain words"
    try:
        return Punctuator.load(bundle)
    except FileNotFoundError:
        raise BundleError(f"{weights} is missing: {meta} needs it beside it ({plain})") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise BundleError(
            f"{meta} does not describe a punctuator: {_reason(e)} ({plain})"
        ) from None
    except ValueError as e:  # not our format, or its vocabulary or sizes not the weights'
        raise BundleError(f"{meta} and {weights} do not agree: {e} ({plain})") from None
    except Exception as e:  # safetensors' own error
        raise BundleError(f"{weights} cannot be read: {_reason(e)} ({plain})") from None


def _reason(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


class SegmentWriter:
    """One segment's partials and final as written, append-only (one per decoder stream)."""

    def __init__(self, punctuator: Punctuator, casing: Mapping[str, str]) -> None:
        self.punctuator = punctuator
        self.casing = casing  # normalised word -> the client's written form (hotwords)
        self._reading = Reading()  # the segment's stable words
        self._written: list[WrittenWord] = []  # its decided words as written
        self._stable = ""  # join(self._written): the written stable text sent so far

    def partial(self, partial: Partial) -> Partial:
        """`partial` written: `stable` its decided stable words, `text` that, then the
        tail's decided words written and its undecided words as recognised."""
        self._read_stable(_whole_words(partial.text, partial.stable))
        words = partial.text.split()
        window, offset = self._window()
        self.punctuator.feed(window, words[len(self._reading.words) :])
        decided = offset + self.punctuator.decided(window)
        tail = self.punctuator.write(window, len(self._written) - offset, decided - offset)
        more = self._cased(words[len(self._written) : decided], tail)
        raw = [self.casing.get(w, w) for w in words[decided:]]
        text = " ".join(t for t in (self._stable, join(more), " ".join(raw)) if t)
        return Partial(text=text, stable=self._stable)

    def final(self, final: Final) -> Final:
        """`final` written: its text closed as a sentence, its words (and its alternatives')
        in their written case without marks; times, confidences and scores as they were.
        The writer has ended its segment."""
        written = self._write_final(final.text.split())
        return final.model_copy(
            update={
                "text": join(written),
                "words": _respelled(final.words, written),
                "alternatives": [self._alternative(a) for a in final.alternatives],
            }
        )

    def unread(self, final: Final) -> int:
        """Words writing `final` would read (its alternatives' included): what it costs."""
        best = len(final.text.split()) - len(self._reading.words)
        return best + sum(len(a.text.split()) for a in final.alternatives)

    def _read_stable(self, words: Sequence[str]) -> None:
        """Read the stable words beyond those read, and write those now decided."""
        have = len(self._reading.words)
        if len(words) <= have:  # none new (a last word read whole may end the text now)
            return
        # the decoder's stable text only grows (decoder/beam.py `partial`)
        assert not have or words[have - 1] == self._reading.words[-1]
        self.punctuator.feed(self._reading, words[have:])
        start, stop = len(self._written), self.punctuator.decided(self._reading)
        more = self._cased(words[start:stop], self.punctuator.write(self._reading, start, stop))
        if more:
            self._written += more
            self._stable = " ".join(t for t in (self._stable, join(more)) if t)

    def _window(self) -> tuple[Reading, int]:
        """A reading that goes on from the stable reading's end without changing it, and
        the index of its first word in the segment: it holds the last `lookahead + 1`
        words, as writing the first undecided word reads the state of the word before
        it and of its lookahead (models/punctuation.py `write`)."""
        keep = self.punctuator.config.lookahead + 1
        offset = max(0, len(self._reading.words) - keep)
        reading = self._reading
        return Reading(reading.words[offset:], reading.states[offset:]), offset

    def _write_final(self, words: list[str]) -> list[WrittenWord]:
        have = self._reading.words
        if words[: len(have)] != have:  # the decoder took back a stable word: never so far
            log.warning("a final does not start with its partials' stable words; written anew")
            return self._cased(words, write_all(self.punctuator, words))
        self.punctuator.feed(self._reading, words[len(have) :], end=True)
        start = len(self._written)
        more = self.punctuator.write(self._reading, start, len(words))
        return close_sentence(self._written + self._cased(words[start:], more))

    def _alternative(self, alternative: Alternative) -> Alternative:
        words = alternative.text.split()
        written = self._cased(words, write_all(self.punctuator, words))
        respelled = None if alternative.words is None else _respelled(alternative.words, written)
        return alternative.model_copy(update={"text": join(written), "words": respelled})

    def _cased(self, words: Sequence[str], written: list[WrittenWord]) -> list[WrittenWord]:
        """`written` (the written forms of `words`) with the hotwords' own capitals."""
        return [
            WrittenWord(self.casing[w], x.mark) if w in self.casing else x
            for w, x in zip(words, written, strict=True)
        ]


def _whole_words(text: str, stable: str) -> list[str]:
    """The words of `stable` (a prefix of `text`) that are whole: its last only where the
    text goes on after a space, as a greedy decoder's stable text may end mid-word."""
    words = stable.split()
    if words and not text[len(stable) :].startswith(" "):
        words.pop()
    return words


def _respelled(words: list[Word], written: Sequence[WrittenWord]) -> list[Word]:
    """Timed words in their written case (no marks); as they were where they are not the
    written words' (no word timestamps asked for)."""
    if len(words) != len(written):
        return words
    return [w.model_copy(update={"word": x.word}) for w, x in zip(words, written, strict=True)]


def tokens(final: Final) -> list[str]:
    """Each of the final's words as its text writes it (case and mark): its text's tokens,
    which align one to one with its words; the words themselves where they do not."""
    written = final.text.split()
    return written if len(written) == len(final.words) else [w.word for w in final.words]
