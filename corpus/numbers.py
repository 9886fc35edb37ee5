"""English number words, as the workshop names them; they live in `models/numbers.py` with
the normaliser that spells numbers out (`models/text.py`)."""

from models.numbers import SCALE_WORDS, cardinal, clock, digits, is_year_like, ordinal, plural, year

__all__ = [
    "SCALE_WORDS",
    "cardinal",
    "clock",
    "digits",
    "is_year_like",
    "ordinal",
    "plural",
    "year",
]
