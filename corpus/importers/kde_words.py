"""Letters and words for children from two KDE games (Debian klettres-data, ktuberling-data),
each said once by one voice a language, Ogg Vorbis at 44.1 kHz. The file name is the text.

KLettres: `<lang>/alpha/A.ogg` is the letter, labelled as the normaliser writes a spelled
letter ('a'); `<lang>/syllab/dog.ogg` is a syllable, kept when it is a word (it has a vowel:
'ch' and 'th' are sounds, not words). KTuberling: `<lang>/<theme>_<word>.ogg` or
`<lang>/<word>.ogg` is the word; the few names the game joins up or misspells are read by
`SPOKEN`, and one whose reading the name does not settle ('ufo') is dropped. Only the English
directories are read (KLettres' `en` and `en_GB`, KTuberling's `en`), each one voice.
"""

from __future__ import annotations

import re
from pathlib import Path

from corpus.importers.candidates import PrepareError, need_dir
from corpus.importers.pack_clips import PackClip, drop, seconds_of
from corpus.importers.report import Report

KLETTRES_DIR = Path("/usr/share/klettres")
KTUBERLING_DIR = Path("/usr/share/ktuberling/sounds")
ENGLISH = re.compile(r"^en(_[A-Z]{2})?$")  # 'en', 'en_GB'
SPOKEN = {
    "palmtree": "palm tree",
    "fallingstar": "falling star",
    "sphynx": "sphinx",
    "broccolli": "broccoli",
}
UNSURE = {"ufo": "said as a word or as the letters U F O"}
_VOWEL = re.compile(r"[aeiouy]", re.IGNORECASE)


def english_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and ENGLISH.match(p.name))


def read_klettres(root: Path, out_dir: Path, report: Report) -> list[PackClip]:
    """Letters and the syllables that are words, from each English directory."""
    clips = []
    for lang in _english(root, "klettres", "KLettres data directory (<lang>/alpha, <lang>/syllab)"):
        voice = f"klettres:{lang.name}"
        for ogg in sorted((lang / "alpha").glob("*.ogg")):
            text = ogg.stem
            if len(text) != 1 or not text.isalpha():
                drop(report, "klettres", "text:not_a_letter", f"{lang.name}/alpha/{ogg.name}")
                continue
            clips += _clip("klettres", f"{lang.name}-letter-{text.lower()}", ogg, voice, text,
                           report)  # fmt: skip
        for ogg in sorted((lang / "syllab").glob("*.ogg")):
            text = ogg.stem
            if not _VOWEL.search(text):
                drop(report, "klettres", "text:not_a_word", f"{lang.name}/syllab/{ogg.name}")
                continue
            clips += _clip("klettres", f"{lang.name}-{text}", ogg, voice, text, report)
    return _some(clips, root, "klettres-data")


def read_ktuberling(root: Path, out_dir: Path, report: Report) -> list[PackClip]:
    """Each English word, its theme prefix ('egypt_') taken off."""
    clips = []
    for lang in _english(root, "ktuberling", "KTuberling sounds directory (<lang>/*.ogg)"):
        voice = f"ktuberling:{lang.name}"
        for ogg in sorted(lang.glob("*.ogg")):
            word = ogg.stem.split("_", 1)[-1]
            if word in UNSURE:
                drop(report, "ktuberling", "text:unsure_reading", f"{ogg.name}: {UNSURE[word]}")
                continue
            text = SPOKEN.get(word, word)
            clips += _clip("ktuberling", f"{lang.name}-{ogg.stem}", ogg, voice, text, report)
    return _some(clips, root, "ktuberling-data")


def _english(root: Path, source: str, what: str) -> list[Path]:
    need_dir(root, what)
    dirs = english_dirs(root)
    if not dirs:
        raise PrepareError(f"no English directory (en, en_GB) under {root}: is it {what}?")
    return dirs


def _clip(
    source: str, name: str, path: Path, voice: str, text: str, report: Report
) -> list[PackClip]:
    key = f"{source}-{name}"
    seconds = seconds_of(path)
    if seconds is None:
        drop(report, source, "audio:unreadable_audio", key)
        return []
    return [PackClip(key, path, seconds, voice, text)]


def _some(clips: list[PackClip], root: Path, package: str) -> list[PackClip]:
    if not clips:
        raise PrepareError(f"no English clips under {root}: is it {package}'s data?")
    return clips
