"""`harken build-lm` with real lmplz/build_binary (built by scripts/setup.sh) on tiny texts."""

from __future__ import annotations

import argparse
from pathlib import Path

import kenlm
import pytest

from decoder import build
from decoder.loading import read_decoder_json, update_decoder_json

CATS = ["the cat sat on the mat", "a cat sat on a hat", "the cat ate the rat"]
DOGS = ["the dog ran to the park", "a dog ran after the ball", "the dog ate the bone"]


def _run(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser()
    build.add_arguments(parser)
    return build.main(parser.parse_args([str(a) for a in argv]))


def _score(bundle: Path, sentence: str) -> float:
    return kenlm.Model(str(bundle / "lm.binary")).score(sentence)


def test_a_repeated_text_weighs_more_and_both_vocabularies_are_kept(tmp_path: Path) -> None:
    cats, dogs = tmp_path / "cats.txt", tmp_path / "dogs.txt"
    cats.write_text("".join(s + "\n" for s in CATS))
    dogs.write_text("".join(s + "\n" for s in DOGS))
    even, heavy = tmp_path / "even", tmp_path / "heavy"
    assert _run("--text", cats, dogs, "--order", "3", "--prune", "0", "--out", even) == 0
    assert _run("--text", f"{cats}*4", dogs, "--order", "3", "--prune", "0", "--out", heavy) == 0
    assert _score(heavy, "the cat sat") > _score(even, "the cat sat")
    assert _score(heavy, "the dog ran") < _score(even, "the dog ran")
    words = set((heavy / "unigrams.txt").read_text().split())
    assert {"cat", "mat", "dog", "bone"} <= words
    # decoder.json records what each text gave, with lm-text's held-out filter where it ran
    assert read_decoder_json(heavy)["texts"] == [
        {"file": f"{cats}", "times": 4, "sentences": 3, "words": 17, "vocabulary": 9},
        {"file": f"{dogs}", "times": 1, "sentences": 3, "words": 17, "vocabulary": 10},
    ]
    (tmp_path / "dogs.report.json").write_text('{"kept": 3, "held_out": ["dev.jsonl"], "ngram": 6}')
    assert _run("--text", dogs, "--order", "3", "--prune", "0", "--out", even) == 0
    (text,) = read_decoder_json(even)["texts"]
    assert text["held_out"] == ["dev.jsonl"] and text["ngram"] == 6 and text["vocabulary"] == 10


def test_missing_text_and_bad_repeat_count_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("one two three\n")
    with pytest.raises(SystemExit, match="does not exist"):
        _run("--text", tmp_path / "none.txt", "--out", tmp_path / "a")
    for bad in (f"{text}*0", f"{text}*x"):
        with pytest.raises(SystemExit, match="repeat count"):
            _run("--text", bad, "--out", tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_raw_text_is_refused_with_its_line(tmp_path: Path) -> None:
    text = tmp_path / "raw.txt"
    text.write_text("the cat sat\nThe dog ran, fast.\n")
    with pytest.raises(SystemExit, match=r"raw.txt line 2: characters outside the alphabet "):
        _run("--text", text, "--out", tmp_path / "lm")
    assert not (tmp_path / "lm").exists()
    # a model whose symbols include capitals and punctuation may read them
    alphabet = " 'abcdefghijklmnopqrstuvwxyzTD,."
    assert (
        _run("--text", text, "--alphabet", alphabet, "--prune", "0", "--out", tmp_path / "lm") == 0
    )
    assert "ran," in (tmp_path / "lm" / "unigrams.txt").read_text().split()


def test_a_new_lm_keeps_the_bundles_search_settings(tmp_path: Path) -> None:
    """Rebuilding a bundle's LM must not silently bring back the default, narrower search."""
    text = tmp_path / "cats.txt"
    text.write_text("".join(s + "\n" for s in CATS))
    out = tmp_path / "bundle"
    assert _run("--text", text, "--order", "3", "--prune", "0", "--out", out) == 0
    update_decoder_json(out, beam_width=768, score_threshold=12.5, alpha=0.7, beta=0.4)
    assert _run("--text", text, "--order", "3", "--prune", "0", "--out", out) == 0
    kept = read_decoder_json(out)["config"]
    assert (kept["beam_width"], kept["score_threshold"], kept["alpha"], kept["beta"]) == (
        768,
        12.5,
        0.7,
        0.4,
    )
    assert _run("--text", text, "--order", "3", "--out", out, "--alpha", "0.3") == 0
    config = read_decoder_json(out)["config"]
    assert (config["beam_width"], config["alpha"], config["beta"]) == (768, 0.3, 0.4)
    (out / "decoder.json").write_text('{"config": {"beam_width": 0}}')
    with pytest.raises(SystemExit, match="beam_width must be >= 1; fix or remove it"):
        _run("--text", text, "--out", out)
