"""Debian's Asterisk English prompts (Allison Smith): a real recorded voice to test on.

The transcript file was written for people, not for training: stage directions, typos and
symbols whose reading is unknown are fixed or dropped here. There is one speaker, and many
prompts repeat each other's sentences, so the split is by prompt group (`split_prompts`),
keeping every sentence in one split; the README written beside the manifests says so.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from corpus.importers.candidates import Candidate, Item, PrepareError, need_dir, need_file
from corpus.importers.report import Report
from corpus.text import Dropped

SOUNDS = Path("/usr/share/asterisk/sounds/en_US_f_Allison")  # asterisk-core-sounds-en-g722
TRANSCRIPTS = Path("/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz")
VOICE = "asterisk:allison"
TEST_PROMPTS = 150
DEV_PROMPTS = 100
MIN_TEST_WORDS = 2  # one word (a letter, a digit, 'goodbye') says little as a test item
SHARED_WORDS = 6  # prompts sharing this many consecutive words stay in one split
CONTAINED_WORDS = 4  # and a prompt this long said whole inside another

# Transcript typos and readings fixed before normalising (the recording says the right word).
FIXES = {
    "represenatives": "representatives",
    "umute": "unmute",
    "fourtieth": "fortieth",
    "exclaimation": "exclamation",
    "Un-indentified or witheld": "Unidentified or withheld",
    "thru": "through",
    "3D": "three D",
    "MGCP": "M G C P",  # 1.7 s, as long as the five letters 'M I S D N': spelled out
    "www.asterisk.org": "W W W dot asterisk dot org",
}
# Prompts whose spoken form the transcript does not settle: dropped, not guessed.
UNSURE = {
    "spy-iax": "IAX said as a word ('eeks'?) or as letters",
    "spy-iax2": "IAX said as a word ('eeks'?) or as letters",
    "spy-h323": "H.323 read digit by digit or as a number",
    "demo-instruct": "extensions 1234, 4242 and 8500: digit by digit or paired",
}
_ANNOTATION = re.compile(r"\[[^\]]*\]|<[^>]*>|\([^)]*\)")  # '[ascending tones]', '(note: ...)'


def read_asterisk(args: argparse.Namespace, report: Report) -> list[Candidate]:
    """`name.g722` files under the sounds directory and `name: text` transcript lines."""
    if args.input is None and not (SOUNDS.is_dir() and args.transcripts.is_file()):
        raise PrepareError(
            f"{SOUNDS} or {args.transcripts} is missing: apt-get install "
            "asterisk-core-sounds-en-g722 asterisk-core-sounds-en, or give --input and --transcripts"
        )
    sounds: Path = need_dir(args.input or SOUNDS, "Asterisk sounds directory")
    prompts = _transcripts(need_file(args.transcripts, "Asterisk transcript file"))
    audio = {p.relative_to(sounds).with_suffix("").as_posix() for p in sounds.rglob("*.g722")}
    if not audio:
        raise PrepareError(f"no *.g722 under {sounds} (package asterisk-core-sounds-en-g722)")
    report.notes["audio_without_transcript"] = sorted(audio - set(prompts))
    fixed, out = [], []
    for name, raw in prompts.items():
        if name not in audio:
            report.drop("audio:missing_audio", f"{name}: {raw}")
            continue
        try:
            text = asterisk_text(name, raw)
        except Dropped as e:
            report.drop(f"text:{e.reason}", f"{name}: {raw}")
            continue
        if text != " ".join(raw.split()):
            fixed.append(name)
        wav = str(sounds / f"{name}.g722")
        out.append(Candidate(name, text, wav, f"audio/{name}.wav", VOICE, codec="g722"))
    report.notes["transcripts_fixed"] = fixed
    return out


def asterisk_text(name: str, raw: str) -> str:
    """A prompt's transcript as spoken: stage directions removed, typos and readings fixed;
    raises `Dropped` where the transcript does not say what was recorded."""
    if name in UNSURE:
        raise Dropped("reading_unknown", UNSURE[name])
    text = _ANNOTATION.sub(" ", raw)
    if not re.search(r"[A-Za-z0-9]", text):
        raise Dropped("non_speech", raw)
    if re.search(r"[*#]", text):  # said 'star'/'pound' or 'asterisk'/'hash': unknown
        raise Dropped("key_symbol", raw)
    for wrong, right in FIXES.items():
        text = re.sub(rf"(?<![\w.]){re.escape(wrong)}(?![\w])", right, text)
    return " ".join(text.split())


def _transcripts(path: Path) -> dict[str, str]:
    """Prompt name -> text from core-sounds-en.txt(.gz); ';' lines are comments."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise PrepareError(f"cannot read {path}: {e}") from None
    prompts = {}
    for line in lines:
        name, sep, text = line.partition(":")
        if sep and name.strip() and not line.startswith(";"):
            prompts[name.strip()] = text.strip()
    if not prompts:
        raise PrepareError(f"{path} has no 'name: text' lines (core-sounds-en.txt)")
    return prompts


def assign_splits(items: list[Item], test: int, dev: int, report: Report) -> list[Item]:
    """Items with the split `split_prompts` gives them, judged on their normalised text."""
    plan = split_prompts({i.cand.key: i.text for i in items}, test, dev)
    items = [replace(i, cand=replace(i.cand, split=plan[i.cand.key])) for i in items]
    report.notes["train_only_short_prompts"] = sum(
        len(i.text.split()) < MIN_TEST_WORDS for i in items
    )
    return items


def split_prompts(
    texts: dict[str, str], test: int, dev: int, min_words: int = MIN_TEST_WORDS
) -> dict[str, str]:
    """Prompt name -> 'train', 'dev' or 'test', so that no sentence is both trained and tested.

    Related prompts (`_groups`) stay together; groups, in the order of a SHA-256 of their first
    name, fill test to `test` prompts, then dev to `dev`; the rest, and every group of prompts
    shorter than `min_words`, go to train."""
    order = sorted(_groups(texts), key=lambda g: hashlib.sha256(g[0].encode()).hexdigest())
    out: dict[str, str] = {}
    filled: Counter[str] = Counter()
    for group in order:
        short = len(texts[group[0]].split()) < min_words  # a group's texts are all long or equal
        split = "train"
        if not short and filled["test"] < test:
            split = "test"
        elif not short and filled["dev"] < dev:
            split = "dev"
        filled[split] += len(group)
        out |= dict.fromkeys(group, split)
    return out


def _groups(texts: dict[str, str]) -> list[list[str]]:
    """Prompts (sorted names) linked by the same text, a shared run of `SHARED_WORDS` words
    (menu variants), or one prompt of at least `CONTAINED_WORDS` words said whole inside
    another ('... followed by the pound key'); a union-find over prompt names."""
    parent = {name: name for name in texts}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[str, str] = {}
    n = SHARED_WORDS
    for name in sorted(texts):
        words = texts[name].split()
        for key in {texts[name]} | {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}:
            parent[root(name)] = root(first.setdefault(key, name))
    padded = {name: f" {text} " for name, text in texts.items()}
    for inner in sorted(texts):
        if len(texts[inner].split()) >= CONTAINED_WORDS:
            for outer in sorted(texts):
                if padded[inner] in padded[outer]:
                    parent[root(inner)] = root(outer)
    members: dict[str, list[str]] = defaultdict(list)
    for name in sorted(texts):
        members[root(name)].append(name)
    return list(members.values())


def write_readme(out_dir: Path, kept: dict[str, Any], r: Report) -> None:
    """README.md beside the manifests: source, licence, and why its test set is no general WER."""
    counts = "\n".join(
        f"- {split}: {kept.get(split, {}).get('utterances', 0)} prompts, "
        f"{kept.get(split, {}).get('hours', 0) * 60:.1f} min"
        for split in ("train", "dev", "test")
    )
    text = f"""# Asterisk English prompts (Allison Smith), prepared by `harken prepare asterisk`

Source: Debian packages asterisk-core-sounds-en-g722 (audio, 16 kHz G.722) and
asterisk-core-sounds-en (transcripts, core-sounds-en.txt.gz).
Licence: CC-BY-SA-3.0, recorded by Allison Smith (copyright 2003-2010 Allison Smith);
derived audio and manifests keep that licence and need attribution.

**One speaker.** Every prompt is the same US woman. A test split of her voice measures how
well a model adapts to her (and to telephone-prompt phrasing), not how it does on people in
general; do not report it as a general word error rate.

Split by prompt, deterministically: prompts with the same normalised text, sharing
{SHARED_WORDS} consecutive words (menu variants), or one of at least
{CONTAINED_WORDS} words said whole inside another, form one group; groups ordered by a
SHA-256 of their first prompt name fill test, then dev; the rest go to train. Prompts of fewer
than {MIN_TEST_WORDS} words (single letters, digits, single words) are train only.
No sentence is in two splits.

{counts}

Dropped prompts, by reason, are in prepare_report.json ({sum(r.dropped.values())} in all).
"""
    (out_dir / "README.md").write_text(text, encoding="utf-8")
