"""`harken tune-lm` refuses a setting the search cannot take before it runs the network."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from evaluation import cli_tune


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--lookahead", "0.5", "2"], "lookahead must be in \\[0, 1\\]"),
        (["--blank-penalty", "nan"], "blank_penalty must be a finite number"),
    ],
)
def test_a_bad_sweep_value_is_refused_with_a_reason(
    flags: list[str], reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    cli_tune.add_arguments(parser)
    # no bundle or manifest exists here: the refusal comes before either is read
    args = parser.parse_args(["--bundle", str(tmp_path), "--manifest", "none.jsonl", *flags])
    assert cli_tune.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("harken tune-lm: ")
    assert re.search(reason, err)
