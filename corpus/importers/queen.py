"""Flight of the Amazon Queen (Debian's flight-of-the-amazon-queen): a professional cast's
acted English, 6,745 MP3 clips at 11,025 Hz, with the game's script in the same file.

`queen.1c` is one archive: `QTBL`, a 6-byte version, 2 bytes of padding, a compression byte
(1: the speech is MP3), a big-endian entry count, then entries of a 12-byte name, a bundle
byte and big-endian offset and size. Speech entries end in `.SB`; the rest are the game's
resources, among them the script:
- `*.DOG` are dialogues with one character; their header holds the dialogue's talk key, the
  two decimal digits that start the names of its clips (`020006P1.SB`: talk key 2, the other
  person, `J` for Joe, the hero). A dialogue's file name is its character (`FAYE4.DOG`).
- `*.CUT` are cut-scenes; they name the dialogues they lead to (`ian1.dog`).
- `*.JAS` hold Joe's descriptions of things (`JOE00011.SB`).
Their text is Pascal strings (a length byte, then the characters) in which `*` and two
characters separate the spoken segments, one clip per segment. The clips' names do not say
which string they say, so `corpus.importers.script_labels` finds each clip's words in the
script from a recogniser's hypothesis.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from corpus.importers.candidates import PrepareError

QUEEN_FILE = Path("/usr/share/scummvm/flight-of-the-amazon-queen/queen.1c")
LICENCE = "Flight of the Amazon Queen licence (free redistribution and modification; Debian main)"
JOE = "queen:joe"
CUTSCENE = "queen:cutscene"
UNKNOWN = "queen:unknown"
_ENTRY = 21  # name 12, bundle 1, offset 4, size 4
_HEADER = 15  # 'QTBL', version 6, padding 2, compression 1, count 2
_DIALOGUE_CLIP = re.compile(r"^(\d\d)[0-9A-FSX]{4}([JP])[0-9A-F]\.SB$")
_CODE = re.compile(r"\*[A-Z0-9]{2}")  # a segment separator / stage direction: '*03', '*FL'
_PRINTABLE = re.compile(rb"[ -~]{3,}")
_DOG_NAME = re.compile(rb"([a-z0-9]+)\.dog", re.IGNORECASE)


@dataclass(frozen=True)
class Entry:
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Archive:
    """What the importer needs of `queen.1c`: its speech clips, each clip's voice, the script
    (records of spoken segments) and which dialogues each cut-scene leads to."""

    clips: dict[str, bytes]  # clip name -> MP3 bytes
    voices: dict[str, str]  # clip name -> 'queen:<character>' (or joe / cutscene / unknown)
    script: list[list[str]]  # records, each a list of spoken segments (raw text)
    cutscene_characters: dict[str, set[str]]  # 'C100A' -> characters of the dialogues it names


def read_table(data: bytes) -> list[Entry]:
    """The entry table; a wrong magic or a table longer than the file is a `PrepareError`."""
    if len(data) < _HEADER or data[:4] != b"QTBL":
        raise PrepareError("not a Flight of the Amazon Queen archive: no QTBL table at its start")
    (count,) = struct.unpack(">H", data[13:15])
    end = _HEADER + count * _ENTRY
    if end > len(data):
        raise PrepareError(f"queen.1c table of {count} entries is longer than the file")
    out = []
    for i in range(count):
        p = _HEADER + i * _ENTRY
        name = data[p : p + 12].split(b"\0")[0].decode("ascii", "replace")
        offset, size = struct.unpack(">II", data[p + 13 : p + 21])
        if offset + size > len(data):
            raise PrepareError(f"queen.1c entry {name} runs past the end of the file")
        out.append(Entry(name, offset, size))
    return out


def read_archive(path: Path) -> Archive:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PrepareError(f"cannot read {path}: {e}") from None
    return read_archive_bytes(data)


def read_archive_bytes(data: bytes) -> Archive:
    entries = read_table(data)
    body = {e.name: data[e.offset : e.offset + e.size] for e in entries}
    characters = {
        key: character
        for name, blob in body.items()
        if name.endswith(".DOG") and (key := talk_key(blob)) is not None
        for character in [re.sub(r"\d+$", "", name[:-4]).lower()]
    }
    clips = {name: blob for name, blob in body.items() if name.endswith(".SB")}
    script = [
        record
        for name, blob in body.items()
        if name.endswith((".DOG", ".CUT", ".JAS"))
        for record in script_records(blob)
    ]
    cut_chars = {
        name[:-4]: {re.sub(r"\d+$", "", m.decode().lower()) for m in _DOG_NAME.findall(blob)}
        for name, blob in body.items()
        if name.endswith(".CUT")
    }
    voices = {name: clip_voice(name, characters) for name in clips}
    return Archive(clips, voices, script, cut_chars)


def talk_key(dog: bytes) -> int | None:
    """A dialogue's talk key: the third big-endian int16 after the bank's 'Datas   ' tag."""
    at = dog.find(b"Datas   ")
    if at < 0 or len(dog) < at + 14:
        return None
    return int(struct.unpack(">h", dog[at + 12 : at + 14])[0])


def clip_voice(name: str, characters: dict[int, str]) -> str:
    """Who speaks a clip, as far as its name tells: Joe, a dialogue's character, or a group
    (cut-scenes, unnamed) whose speakers the name does not give."""
    if name.startswith("JOE"):
        return JOE
    if m := _DIALOGUE_CLIP.match(name):
        if m.group(2) == "J":
            return JOE
        character = characters.get(int(m.group(1)))
        return f"queen:{character}" if character else UNKNOWN
    if name.startswith("C") and name[1:2].isdigit():
        return CUTSCENE
    return UNKNOWN


def cutscene_of(name: str) -> str | None:
    """The cut-scene a clip belongs to ('C100A032.SB' -> 'C100A', 'C1A__051.SB' -> 'C1A')."""
    m = re.match(r"^(C\d+[A-Z]?)", name)
    return m.group(1) if m else None


def script_records(blob: bytes) -> list[list[str]]:
    """The Pascal strings of a resource that read as spoken text, each split into segments.

    Strings sit between binary fields and next to each other, so each maximal printable run is
    cut into strings by their length bytes (`_pascal_strings`); a run that does not cut evenly
    is kept whole rather than lost."""
    out = []
    for m in _PRINTABLE.finditer(blob):
        before = blob[m.start() - 1] if m.start() else 0
        for text in _pascal_strings(m.group(), before) or [m.group()]:
            if _is_file_name(text):
                continue
            segments = [s.strip() for s in _CODE.split(text.decode("ascii"))]
            segments[0] = _strip_stray_lead(segments[0])
            segments = [s for s in segments if re.search(r"[A-Za-z]{2}", s)]
            if segments:
                out.append(segments)
    return out


def _pascal_strings(run: bytes, length: int) -> list[bytes] | None:
    """`run` as strings whose length byte is `length` (the non-printable byte before it) for
    the first and in the run itself for the rest; None when no such cut covers it exactly."""
    if 0 < length <= len(run):
        rest = run[length:]
        tail = _pascal_strings(rest[1:], rest[0]) if rest else []
        if tail is not None:
            return [run[:length], *tail]
    if not run or run[0] + 1 > len(run) or run[0] < 3:
        return None
    return _pascal_strings(run[1:], run[0])


def _strip_stray_lead(text: str) -> str:
    """A string's start without the option numbers and length bytes that a cut could not
    place: symbols and digits before its first letter ('$!There's' -> "There's"), and a
    lower-case letter glued to a capital ('hGee' -> 'Gee')."""
    text = re.sub(r"^[^A-Za-z(\"]+", "", text)
    return re.sub(r"^[a-z](?=['\"]?[A-Z])", "", text)


def _is_file_name(text: bytes) -> bool:
    return re.fullmatch(rb"[A-Za-z0-9_]+\.[A-Za-z]{3}", text) is not None
