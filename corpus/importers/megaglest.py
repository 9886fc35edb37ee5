"""MegaGlest's unit voices (Debian megaglest-data): what a unit says when it is selected or
given an order ('Yes, my lord', 'At your command'), WAV at 22.05 to 48 kHz.

A unit's XML (`techs/<tech>/factions/<faction>/units/<unit>/<unit>.xml`) lists them under
`selection-sounds` and `command-sounds`; every other sound of the package (attacks, deaths,
work, music, ambience) is an effect and is never read. A path is relative to the unit's
directory or starts with `$COMMONDATAPATH` (the tech's `commondata`). Units share recordings,
by path or as copies, so each recording is taken once (by its bytes' SHA-256). Its voice is the
role it is named after ('swordman_ack3.wav': the tech's swordman, whichever units reuse it),
or its unit where the name has none ('ack1.wav'). Animals and buildings that answer with a
moo or a click (`NOT_SPEECH`) are dropped before the recogniser hears them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from corpus.importers.candidates import PrepareError, need_dir
from corpus.importers.pack_clips import PackClip, drop, seconds_of
from corpus.importers.report import Report

TECHS_DIR = Path("/usr/share/games/megaglest/techs")
SOURCE = "megaglest"
SOUND_LISTS = ("selection-sounds", "command-sounds")
COMMON = "$COMMONDATAPATH"
# roles whose answer is not a word: the farm animals, the elephant, the birds and dragons
# (a screech), and the buildings' click
NOT_SPEECH = frozenset(
    ["bull", "chicken", "cow", "dragon", "eagle", "ele", "pig", "sheep", "magic_click",
     "tech_click"]
)  # fmt: skip
_ROLE = re.compile(r"^(.*?)_?(?:select|sel|ack)\d*$")


@dataclass(frozen=True)
class VoiceRef:
    """One sound a unit's XML lists as its voice."""

    tech: str
    unit: str
    xml: Path
    path: Path  # normalised, not resolved: inside the techs directory


def voice_refs(techs: Path) -> list[VoiceRef]:
    """Every selection and command sound of every unit, in path order; an XML that does not
    parse is a `PrepareError`, since its units' voices would silently go missing."""
    refs = []
    for xml in sorted(techs.glob("*/factions/*/units/*/*.xml")):
        if xml.stem != xml.parent.name:
            continue
        try:
            root = ET.parse(xml).getroot()
        except (ET.ParseError, OSError) as e:
            raise PrepareError(f"cannot read MegaGlest unit {xml}: {e}") from None
        tech = xml.relative_to(techs).parts[0]
        for tag in SOUND_LISTS:
            for listed in root.iter(tag):
                if listed.get("enabled", "true") != "true":
                    continue
                for sound in listed.iter("sound"):
                    path = sound.get("path")
                    if path:
                        where = _resolve(techs, tech, xml.parent, path)
                        refs.append(VoiceRef(tech, xml.parent.name, xml, where))
    return refs


def _resolve(techs: Path, tech: str, unit_dir: Path, path: str) -> Path:
    if path.startswith(COMMON):
        path = str(techs / tech / "commondata") + path[len(COMMON) :]
    else:
        path = str(unit_dir / path)
    return Path(os.path.normpath(path))


def role_of(stem: str, unit: str) -> str:
    """Whose voice a file is, by its name: 'swordman_ack3' -> 'swordman', 'ack1' -> its unit,
    'sheep4' -> 'sheep'."""
    m = _ROLE.match(stem)
    if m:
        return m.group(1) or unit
    return re.sub(r"\d+$", "", stem) or unit


def read(techs: Path, out_dir: Path, report: Report) -> list[PackClip]:
    """Each distinct voice recording once, with its role as the voice."""
    need_dir(techs, "MegaGlest techs directory")
    refs = voice_refs(techs)
    if not refs:
        raise PrepareError(
            f"no MegaGlest unit under {techs} lists selection or command sounds: is it "
            "megaglest-data's techs directory (<tech>/factions/<faction>/units/<unit>/)?"
        )
    seen: set[str] = set()
    done: set[Path] = set()
    clips = []
    for ref in refs:
        if ref.path in done:
            continue
        done.add(ref.path)
        key_base = f"{SOURCE}-{ref.tech}-{ref.unit}-{ref.path.stem}"
        try:
            data = ref.path.read_bytes()
        except OSError:
            drop(report, SOURCE, "audio:missing_audio", f"{key_base}: {ref.path}")
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            report.notes["megaglest_copies"] = report.notes.get("megaglest_copies", 0) + 1
            continue
        seen.add(digest)
        role = role_of(ref.path.stem, ref.unit)
        key = f"{SOURCE}-{ref.tech}-{role}-{ref.path.stem}-{digest[:6]}"
        if role in NOT_SPEECH:
            drop(report, SOURCE, "voice:not_speech", key)
            continue
        seconds = seconds_of(ref.path)
        if seconds is None:
            drop(report, SOURCE, "audio:unreadable_audio", key)
            continue
        clips.append(PackClip(key, ref.path, seconds, f"{SOURCE}:{ref.tech}/{role}"))
    return clips


def copy_voices(techs: Path, dest: Path) -> int:
    """Copy the unit XMLs and the voice recordings they list from an unpacked megaglest-data
    (`usr/share/games/megaglest/techs`) to `dest`, keeping their paths (scripts/setup.sh: the
    package is 240 MB, its voices a tenth of that). Returns the number of files copied."""
    refs = voice_refs(techs)
    files = {r.xml for r in refs} | {r.path for r in refs if r.path.is_file()}
    for f in sorted(files):
        target = dest / f.relative_to(techs)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return len(files)
