"""Transcript normalisation, as the workshop's importers and synthesis name it.

The normaliser lives in `models/text.py`, beside the alphabet it writes, because serving
normalises hotwords with it too and never imports the workshop.
"""

from models.text import (
    ABBREVIATIONS,
    Dropped,
    Normalised,
    fold,
    normalise,
    normalise_loose,
    normalise_phrase,
)

__all__ = [
    "ABBREVIATIONS",
    "Dropped",
    "Normalised",
    "fold",
    "normalise",
    "normalise_loose",
    "normalise_phrase",
]
