"""English number words: cardinals, ordinals, years, decimals and clock times.

Transcripts must say exactly what the synthesiser says, so numbers are spelled out before
rendering; this module is the one place that knows how.
"""

from __future__ import annotations

_ONES = tuple(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ]
)
_TENS = tuple(
    ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
)
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
SCALE_WORDS = frozenset({"hundred", "thousand", "million", "billion", "trillion"})


def cardinal(n: int) -> str:
    """1984 -> 'one thousand nine hundred eighty four' (no 'and', as in American usage)."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n >= 10**15:
        raise ValueError(f"number {n} is too large to spell out")
    if n < 1000:
        return _below_thousand(n)
    for value, name in _SCALES:
        if n >= value:
            head, rest = divmod(n, value)
            tail = f" {cardinal(rest)}" if rest else ""
            return f"{cardinal(head)} {name}{tail}"
    raise AssertionError("unreachable")


def _below_thousand(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    return f"{_ONES[hundreds]} hundred" + (f" {_below_thousand(rest)}" if rest else "")


def ordinal(n: int) -> str:
    """21 -> 'twenty first'; only the last word takes the ordinal form."""
    words = cardinal(n).split()
    last = words[-1]
    if last in _ORDINAL_IRREGULAR:
        words[-1] = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def year(n: int) -> str:
    """Years as people say them: 1984 -> 'nineteen eighty four', 1905 -> 'nineteen oh five'."""
    if n % 1000 < 10 and n >= 2000 or n < 1000 or n >= 10000:
        return cardinal(n)
    century, rest = divmod(n, 100)
    if rest == 0:
        return f"{cardinal(century)} hundred"
    tail = f"oh {_ONES[rest]}" if rest < 10 else cardinal(rest)
    return f"{cardinal(century)} {tail}"


def is_year_like(n: int) -> bool:
    """Four-digit numbers that are read as years rather than as cardinals."""
    return 1100 <= n <= 1999 or 2010 <= n <= 2099


def digits(text: str) -> str:
    """'0314' -> 'zero three one four' (for the digits after a decimal point)."""
    return " ".join(_ONES[int(c)] for c in text)


def plural(words: str) -> str:
    """'nineteen sixty' -> 'nineteen sixties' (for '1960s')."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def clock(hours: int, minutes: int) -> str:
    """3:00 -> "three o'clock", 3:05 -> 'three oh five', 12:30 -> 'twelve thirty'."""
    if minutes == 0:
        return f"{cardinal(hours)} o'clock"
    if minutes < 10:
        return f"{cardinal(hours)} oh {_ONES[minutes]}"
    return f"{cardinal(hours)} {cardinal(minutes)}"
