"""`harken punctuation-text`: which texts train the punctuation model and which are held out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from corpus import punctuation_text

# five Brown samples: the first (ca01) is the held-out fifth, as `make_default.sh prose` has it
SAMPLE = "\n\n\tThe/at jury/nn said/vbd ,/, ``/`` Is/bez it/pps true/jj ?/. ''/''\n"
FORTUNES = (
    "What is the meaning of life? Nobody knows.\n%\n"
    "Proof by eminent authority is no proof at all, said the old professor.\n%\n"
    "Never eat more than you can lift.\n%\n"
)


def _run(tmp_path: Path, held: list[str]) -> dict[str, list[dict[str, Any]]]:
    brown = tmp_path / "package"
    brown.mkdir()
    for name in ("ca01", "ca02", "cb01", "cc01", "cd01"):
        (brown / name).write_text(SAMPLE.replace("jury", f"jury{name[-1]}"), encoding="latin-1")
    fortunes = tmp_path / "fortunes"
    fortunes.mkdir()
    (fortunes / "tiny").write_text(FORTUNES)
    manifest = tmp_path / "test.jsonl"
    manifest.write_text("".join(json.dumps({"audio": "a.wav", "text": t}) + "\n" for t in held))
    parser = argparse.ArgumentParser()
    punctuation_text.add_arguments(parser)
    out = tmp_path / "punct"
    argv = ["--out", out, "--brown", brown, "--fortunes", fortunes, "--held-out", manifest]
    assert punctuation_text.main(parser.parse_args([str(a) for a in argv])) == 0
    return {
        part: [json.loads(line) for line in (out / f"{part}.jsonl").read_text().splitlines()]
        for part in punctuation_text.PARTS
    }


def test_every_fifth_brown_sample_is_held_out_and_held_out_transcripts_are_left_out(
    tmp_path: Path,
) -> None:
    parts = _run(tmp_path, ["proof by eminent authority is no proof at all"])
    assert [d["name"] for d in parts["held_brown"]] == ["brown/ca01"]
    names = [d["name"] for d in parts["train"] + parts["held_fortunes"]]
    assert [n for n in names if n.startswith("brown/")] == [
        "brown/ca02",
        "brown/cb01",
        "brown/cc01",
        "brown/cd01",
    ]
    fortunes = [s for d in parts["train"] + parts["held_fortunes"] for s in d["sentences"]]
    assert "Never eat more than you can lift." in fortunes
    assert not any("eminent authority" in s for s in fortunes)  # a test transcript's text
    assert parts["held_brown"][0]["sentences"] == ["The jury1 said, Is it true?"]
    report = json.loads((tmp_path / "punct" / "report.json").read_text())
    assert report["dropped"] == {"overlaps a held-out transcript": 1}
