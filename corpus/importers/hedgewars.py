"""Hedgewars' hedgehog voices (Debian hedgewars-data): the shouts of a turn ('Incoming!',
'Missed!', 'Take cover!'), a character a pack, Ogg Vorbis at 44.1 kHz.

`Data/Sounds/voices/<Pack>/<Cue>.ogg`: a pack is one voice, named by its character ('Pirate',
'Mobster'). Packs named with a language code ('Default_ru', 'Russian_pl') are translations
and are left out; 'Russian' is English with an accent. A file name is the game's cue, not what
is said ('Firepunch3', 'Youllregretthat'), so the recogniser labels the clips; cues for sounds
that are not words (grunts, coughs, a laugh) are dropped before it hears them.
"""

from __future__ import annotations

import re
from pathlib import Path

from corpus.importers.candidates import PrepareError, need_dir
from corpus.importers.pack_clips import PackClip, drop, seconds_of
from corpus.importers.report import Report

VOICES_DIR = Path("/usr/share/games/hedgewars/Data/Sounds/voices")
SOURCE = "hedgewars"
TRANSLATION = re.compile(r"_[a-z]{2}$")  # 'Default_es', 'Russian_pl'
NON_VERBAL = re.compile(r"^(Ooff|Ow|Jump|Laugh|Hmm|PoisonCough|PoisonMoan)\d*$")


def english_packs(voices_dir: Path) -> list[Path]:
    """The packs in English: every directory but the translations."""
    return sorted(p for p in voices_dir.iterdir() if p.is_dir() and not TRANSLATION.search(p.name))


def read(voices_dir: Path, out_dir: Path, report: Report) -> list[PackClip]:
    """Every clip of the English packs, grunts dropped; a package without one is an error."""
    need_dir(voices_dir, "Hedgewars voices directory (Data/Sounds/voices)")
    packs = english_packs(voices_dir)
    report.notes["hedgewars_packs"] = {
        "english": [p.name for p in packs],
        "translations_left_out": sorted(
            p.name for p in voices_dir.iterdir() if p.is_dir() and TRANSLATION.search(p.name)
        ),
    }
    clips = []
    for pack in packs:
        for ogg in sorted(pack.glob("*.ogg")):
            key = f"{SOURCE}-{pack.name}-{ogg.stem}"
            if NON_VERBAL.match(ogg.stem):
                drop(report, SOURCE, "cue:non_verbal", key)
                continue
            seconds = seconds_of(ogg)
            if seconds is None:
                drop(report, SOURCE, "audio:unreadable_audio", key)
                continue
            clips.append(PackClip(key, ogg, seconds, f"{SOURCE}:{pack.name}"))
    if not clips:
        raise PrepareError(
            f"no English voice clips (<Pack>/*.ogg) under {voices_dir}: "
            "is it hedgewars-data's Data/Sounds/voices?"
        )
    return clips
