"""English text to the model alphabet: what the transcript says is exactly what is spoken.

`normalise` turns a sentence into two strings with the same words: `text`, the transcript
(lower case a-z, space and apostrophe, numbers and abbreviations spelled out), and `spoken`,
what a synthesiser is given (the same words, with prosodic punctuation and acronyms in capitals
so that engines read them as letters). Anything it cannot say with confidence raises `Dropped`
with a reason, so callers count what they lose instead of training on a mangled transcript.
`normalise_phrase` reads a phrase a client wants recognised (a hotword) as best it can instead.
It lives beside the alphabet, in `models`, because serving normalises hotwords with it too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from models import numbers
from models.config import ALPHABET

_ALLOWED = frozenset(ALPHABET)

# Abbreviations spelled out; keys are lower case with their periods.
ABBREVIATIONS: dict[str, str] = {
    "mr.": "mister",
    "mrs.": "missus",
    "ms.": "miz",
    "dr.": "doctor",
    "st.": "saint",
    "jr.": "junior",
    "sr.": "senior",
    "prof.": "professor",
    "gen.": "general",
    "col.": "colonel",
    "capt.": "captain",
    "lt.": "lieutenant",
    "sgt.": "sergeant",
    "rev.": "reverend",
    "gov.": "governor",
    "sen.": "senator",
    "pres.": "president",
    "vs.": "versus",
    "etc.": "et cetera",
    "e.g.": "for example",
    "i.e.": "that is",
    "mt.": "mount",
    "ft.": "feet",
    "approx.": "approximately",
    "jan.": "january",
    "feb.": "february",
    "aug.": "august",
    "sept.": "september",
    "oct.": "october",
    "nov.": "november",
    "dec.": "december",
}
_FOLD = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
_SILENT = frozenset('"()[]-/*_~\t\n\r ')  # quotes, brackets, dashes, emphasis: no sound
_PAUSES = {",": ",", ";": ",", ":": ",", ".": ".", "!": "!", "?": "?"}

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"  # '1,000,000.5'; '1,2' is two numbers
_TOKEN = re.compile(
    rf"""(?P<time>\d{{1,2}}:\d{{2}}(?![\d:]))
    |(?P<money>\${_NUM})
    |(?P<ordinal>\d+(?:st|nd|rd|th)\b)
    |(?P<decade>\d+'?s\b)
    |(?P<percent>{_NUM}%)
    |(?P<number>{_NUM})
    |(?P<initials>(?:[A-Za-z]\.){{2,}})
    |(?P<abbrev>[A-Za-z]+\.)
    |(?P<word>[A-Za-z]+(?:'[A-Za-z]+)*)
    |(?P<apostrophe>')
    |(?P<amp>&)
    |(?P<pause>[.,;:!?]+)
    |(?P<space>\s+)
    |(?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


class Dropped(ValueError):
    """A sentence that cannot be normalised faithfully; `reason` is a short counting key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Normalised:
    text: str  # transcript over the alphabet, single spaces, no leading or trailing space
    spoken: str  # the same words for a synthesiser, with pauses and spelled acronyms

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class _Out:
    """Words collected so far: transcript words and their spoken forms, kept in step."""

    text: list[str]
    spoken: list[str]
    shouted: frozenset[int]  # starts of capitalised words that are shouting, not acronyms
    quoting: bool = False  # inside 'single quotes'
    pending: str = ""  # a unit said after the next word ('$3 million' -> '... million dollars')

    def add(self, words: str, spoken: str | None = None) -> None:
        self.text.extend(words.split())
        self.spoken.append(words if spoken is None else spoken)

    def pause(self, mark: str) -> None:
        if self.spoken and self.spoken[-1][-1] not in ",.!?":
            self.spoken[-1] += mark


def fold(raw: str) -> str:
    """Typographic quotes and dashes to ASCII, accents stripped ('café' -> 'cafe')."""
    raw = "".join(_FOLD.get(c, c) for c in raw).replace("\u2026", "...")
    decomposed = unicodedata.normalize("NFKD", raw)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalise(raw: str) -> Normalised:
    """One sentence to transcript and spoken form; raises `Dropped` if it cannot be said."""
    folded = fold(raw)
    out = _Out([], [], _shouted(folded))
    tokens = [m for m in _TOKEN.finditer(folded) if m.lastgroup != "space"]
    for i, match in enumerate(tokens):
        kind = match.lastgroup or "other"
        _check_glued(match, kind)
        _HANDLERS[kind](out, match, tokens[i + 1 : i + 2])
    text = " ".join(out.text)
    if not text:
        raise Dropped("empty", repr(raw[:60]))
    bad = set(text) - _ALLOWED
    assert not bad, f"normaliser produced characters outside the alphabet: {bad}"
    return Normalised(text=text, spoken=" ".join(out.spoken))


# letters glued to digits ('R2D2'): a phrase reads them one by one
_GLUED = re.compile(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
# what the tokens above can read; any other sign in a phrase is left out
_READABLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'.,;:!?&$%")


def normalise_phrase(raw: str) -> str:
    """A phrase (a hotword, a name) as transcript text; '' when nothing in it can be said.

    `normalise` drops a sentence it cannot read faithfully, since training must not learn a
    mangled transcript; a phrase a client wants recognised is read as best it can be instead:
    letters glued to digits one by one ('R2D2' -> 'r two d two'), signs without a sound
    left out, and then any word that still cannot be read."""
    try:
        return normalise(raw).text
    except Dropped:
        pass
    spaced = _GLUED.sub(" ", fold(raw))
    plain = "".join(c if c in _READABLE else " " for c in spaced)
    try:
        return normalise(plain).text
    except Dropped:
        pass
    words = []
    for word in plain.split():
        try:
            words.append(normalise(word).text)
        except Dropped:
            continue
    return " ".join(words)


def _shouted(s: str) -> frozenset[int]:
    """Capitalised words next to other capitalised words ('MORAL OF THE STORY') are shouted;
    a lone one ('sold to IBM') is an acronym. A mostly capitalised sentence is all shouted."""
    words = list(re.finditer(r"[A-Za-z']+", s))
    caps = [w.group().isupper() and len(w.group()) > 1 for w in words]
    if sum(caps) > 0.5 * max(len(words), 1):
        return frozenset(w.start() for w in words)
    return frozenset(
        w.start()
        for i, w in enumerate(words)
        if caps[i] and ((i > 0 and caps[i - 1]) or (i + 1 < len(caps) and caps[i + 1]))
    )


def _check_glued(m: re.Match[str], kind: str) -> None:
    """'4x4', 'mp3', 'B52': digits glued to letters have no single reading, so drop them."""
    s = m.string
    before = s[m.start() - 1] if m.start() > 0 else " "
    after = s[m.end()] if m.end() < len(s) else " "
    numeric = kind in ("time", "money", "ordinal", "decade", "percent", "number")
    if (numeric and (before.isalpha() or after.isalnum())) or (
        kind == "word" and (before.isdigit() or after.isdigit())
    ):
        raise Dropped("mixed_alnum", repr(s[max(0, m.start() - 10) : m.end() + 10]))


def _amount(digits_text: str) -> str:
    """'1,000' -> 'one thousand', '3.14' -> 'three point one four', '1984' -> year reading."""
    whole, _, frac = digits_text.partition(".")
    plain = whole.replace(",", "")
    if len(plain) > 15:
        raise Dropped("number_format", f"{digits_text!r} is too long to read")
    if len(plain) > 1 and plain.startswith("0"):
        words = numbers.digits(plain)
    elif "," not in whole and not frac and len(plain) == 4 and numbers.is_year_like(int(plain)):
        words = numbers.year(int(plain))
    else:
        words = numbers.cardinal(int(plain))
    return f"{words} point {numbers.digits(frac)}" if frac else words


Next = list[re.Match[str]]  # the token after this one, if any


def _number(out: _Out, m: re.Match[str], nxt: Next) -> None:
    out.add(_amount(m.group()))


def _percent(out: _Out, m: re.Match[str], nxt: Next) -> None:
    out.add(_amount(m.group()[:-1]) + " percent")


def _ordinal(out: _Out, m: re.Match[str], nxt: Next) -> None:
    tok = m.group()
    value = int(tok[:-2])
    last = value % 10 if value % 100 not in (11, 12, 13) else 0
    if tok[-2:] != {1: "st", 2: "nd", 3: "rd"}.get(last, "th"):
        raise Dropped("number_format", f"{tok!r} has the wrong ordinal suffix")
    out.add(numbers.ordinal(value))


def _decade(out: _Out, m: re.Match[str], nxt: Next) -> None:
    out.add(numbers.plural(_amount(m.group().rstrip("s").rstrip("'"))))


def _time(out: _Out, m: re.Match[str], nxt: Next) -> None:
    hours, minutes = (int(x) for x in m.group().split(":"))
    if hours > 24 or minutes > 59:
        raise Dropped("number_format", f"{m.group()!r} is not a clock time")
    out.add(numbers.clock(hours, minutes))


def _money(out: _Out, m: re.Match[str], nxt: Next) -> None:
    """'$5' -> 'five dollars', '$2.50' -> 'two dollars fifty cents', '$3 million' too."""
    amount = m.group()[1:]
    is_word = nxt and nxt[0].lastgroup in ("word", "abbrev")
    scale = nxt[0].group().lower().rstrip(".") if is_word else ""
    if scale in numbers.SCALE_WORDS:
        out.add(_amount(amount))
        out.pending = "dollars"  # said after the scale word: 'three million dollars'
        return
    whole, _, cents = amount.partition(".")
    if cents and len(cents) != 2:
        raise Dropped("number_format", f"{m.group()!r} is not dollars and cents")
    dollars = _amount(whole)
    words = f"{dollars} {'dollar' if dollars == 'one' else 'dollars'}"
    if cents and int(cents):
        words += f" {numbers.cardinal(int(cents))} {'cent' if cents == '01' else 'cents'}"
    out.add(words)


def _word(out: _Out, m: re.Match[str], nxt: Next) -> None:
    tok = m.group().rstrip(".")
    if tok.isupper() and 2 <= len(tok) <= 5 and m.start() not in out.shouted and "'" not in tok:
        out.add(" ".join(tok.lower()), " ".join(tok))  # an acronym: read letter by letter
    else:
        out.add(tok.lower())
    if out.pending:
        out.add(out.pending)
        out.pending = ""


def _abbrev(out: _Out, m: re.Match[str], nxt: Next) -> None:
    expansion = ABBREVIATIONS.get(m.group().lower())
    if len(m.group()) == 2 and m.group()[0].isupper():  # an initial: 'J. R. R. Tolkien'
        out.add(m.group()[0].lower(), m.group()[0])
    elif expansion is None:  # an ordinary word that ends a sentence
        _word(out, m, nxt)
        out.pause(".")
    else:
        out.add(expansion)


def _initials(out: _Out, m: re.Match[str], nxt: Next) -> None:
    """'e.g.' from the table; otherwise letters one by one ('U.S.A.' -> 'u s a')."""
    expansion = ABBREVIATIONS.get(m.group().lower())
    if expansion is not None:
        out.add(expansion)
        return
    letters = m.group().replace(".", "")
    out.add(" ".join(letters.lower()), " ".join(letters.upper()))


def _apostrophe(out: _Out, m: re.Match[str], nxt: Next) -> None:
    """A stray apostrophe is a quote mark, except the plural possessive ("the dogs' bowls")."""
    s, i = m.string, m.start()
    before = s[i - 1] if i > 0 else " "
    after = s[i + 1] if i + 1 < len(s) else " "
    if not before.isalpha():
        out.quoting = out.quoting or after.isalpha()
    elif out.quoting:
        out.quoting = False
    elif before == "s" and not after.isalpha() and out.text:
        out.text[-1] += "'"
        out.spoken[-1] += "'"


def _amp(out: _Out, m: re.Match[str], nxt: Next) -> None:
    out.add("and")


def _pause(out: _Out, m: re.Match[str], nxt: Next) -> None:
    tok = m.group()
    out.pause("?" if "?" in tok else "!" if "!" in tok else _PAUSES[tok[0]])


def _other(out: _Out, m: re.Match[str], nxt: Next) -> None:
    if m.group() not in _SILENT:
        raise Dropped("unspeakable_char", repr(m.group()))


_HANDLERS: dict[str, Callable[[_Out, re.Match[str], Next], None]] = {
    "time": _time,
    "money": _money,
    "ordinal": _ordinal,
    "decade": _decade,
    "percent": _percent,
    "number": _number,
    "initials": _initials,
    "abbrev": _abbrev,
    "word": _word,
    "apostrophe": _apostrophe,
    "amp": _amp,
    "pause": _pause,
    "other": _other,
}


_OUTSIDE_ALPHABET = re.compile(r"[^a-z' ]+")
_LOOSE_APOSTROPHE = re.compile(r"(?<![a-z])'|'(?![a-z])")


def normalise_loose(raw: str) -> str:
    """Another recogniser's text the way the transcripts are written (peers' rows, labels
    from a recogniser). Where the normaliser refuses the sentence, each word is tried alone,
    so one odd symbol does not cost the spelled-out numbers around it; a word it still
    refuses is only lower-cased and stripped."""
    try:
        return normalise(raw).text
    except Dropped:
        words = (_normalise_word(w) for w in raw.split())
        return " ".join(w for w in words if w)


def _normalise_word(word: str) -> str:
    try:
        return normalise(word).text
    except Dropped:
        return _cleanup(word)


def _cleanup(raw: str) -> str:
    """Lower case, accents folded, anything outside a-z, space and apostrophe dropped."""
    text = _OUTSIDE_ALPHABET.sub(" ", fold(raw).lower())
    return " ".join(_LOOSE_APOSTROPHE.sub(" ", text).split())
