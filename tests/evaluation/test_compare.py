"""`harken compare`: two `harken eval` reports of one manifest, paired utterance by utterance."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from evaluation import cli_eval, compare
from tests.evaluation.test_cli_eval import make_manifest, parse


def report(rows: list[list[int]], audio: list[str] | None = None) -> dict[str, Any]:
    audio = audio or [f"u{i}.wav" for i in range(len(rows))]
    return {"per_utterance": {"audio": audio, "beam": rows}}


def run(tmp_path: Path, a: dict[str, Any], b: dict[str, Any], *flags: str) -> str:
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, doc in zip(paths, (a, b), strict=True):
        path.write_text(json.dumps(doc))
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args([str(p) for p in paths] + list(flags))
    assert compare.main(args) == 0
    return (tmp_path / "table.md").read_text() if "--out" in flags else ""


def test_eval_reports_of_one_bundle_pair_up_and_show_no_difference(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    manifest = make_manifest(tmp_path)
    reports = []
    for name in ("a", "b"):
        args = parse("--bundle", str(tiny_bundle), "--manifest", str(manifest))
        args.out = tmp_path / f"{name}.json"
        assert cli_eval.main(args) == 0
        reports.append(json.loads(args.out.read_text()))
    rows = reports[0]["per_utterance"]
    assert rows["audio"] == [f"u{i}.wav" for i in range(5)]  # relative to the manifest
    assert len(rows["greedy"]) == 5
    assert (
        sum(r[0] for r in rows["greedy"])
        == reports[0]["decoders"]["greedy"]["overall"]["word_errors"]
    )
    results = compare.compare(reports[0], reports[1], (Path("a"), Path("b")), 1000, 0)
    assert [(c.decoder, c.unit) for c in results] == [("greedy", "WER"), ("greedy", "CER")]
    for c in results:
        assert c.difference == 0 and c.low == c.high == 0 and c.p_worse == 0
        assert c.better == c.worse == 0


def test_a_candidate_better_on_every_utterance_is_confidently_better(tmp_path: Path) -> None:
    a = report([[3, 10, 9, 40]] * 30)
    b = report([[1, 10, 4, 40]] * 30)
    table = run(tmp_path, a, b, "--rounds", "500", "--out", str(tmp_path / "table.md"))
    assert "| beam | WER | 30.00% | 10.00% | -20.00 | -20.00 to -20.00 | 0.00 | 30 / 0 |" in table
    # a one-utterance difference among many is within the noise: the interval spans zero
    c = compare.compare(
        report([[2, 10, 5, 40]] * 30), report([[2, 10, 5, 40]] * 29 + [[3, 10, 6, 40]]),
        (Path("a"), Path("b")), 2000, 0,
    )[0]  # fmt: skip
    assert c.low <= 0 < c.high and 0 < c.p_worse < 1 and (c.better, c.worse) == (0, 1)


@pytest.mark.parametrize(
    ("b", "message"),
    [
        (report([[1, 2, 1, 5]] * 3, ["x.wav", "y.wav", "z.wav"]), "score different utterances"),
        (report([[1, 3, 1, 5]] * 3), "references differ"),
        ({"decoders": {}}, "no per-utterance rows"),
    ],
)
def test_reports_that_do_not_pair_are_refused_with_a_reason(
    tmp_path: Path, b: dict[str, Any], message: str
) -> None:
    with pytest.raises(SystemExit, match=message):
        run(tmp_path, report([[1, 2, 1, 5]] * 3), b)
