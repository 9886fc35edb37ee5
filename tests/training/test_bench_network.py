"""The network benchmark: a row per variant with real throughput, and the table saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.models.conftest import TINY_CONFIGS
from tests.training.test_train import make_corpus
from training import bench_network


def test_each_variant_gets_a_measured_row_and_the_table_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_corpus(tmp_path, 12)
    tiny = {"linear": TINY_CONFIGS["2d-gru"], "mel stride 3": TINY_CONFIGS["mel-1d-stride3"]}
    monkeypatch.setattr(bench_network, "VARIANTS", tiny)
    manifest = str(tmp_path / "train.jsonl")
    out = tmp_path / "out"
    argv = ["--train", manifest, "--dev", manifest, "--budget-s", "1", "--score"]
    assert bench_network.main([*argv, "--out", str(out), "--precision", "fp32"]) == 0
    rows = json.loads((out / "network.json").read_text())["results"]
    assert [r["variant"] for r in rows] == list(tiny)
    for r in rows:
        assert r["steps"] >= 1 and r["audio_s_per_s"] > 0 and 0 <= r["dev_cer"] <= 1.5
    assert rows[1]["output_frames_per_s"] == pytest.approx(33.3)
    table = (out / "network.md").read_text()
    assert "| linear |" in table and "| mel stride 3 |" in table and "1.00x" in table
    with pytest.raises(SystemExit):  # a misspelt variant is named, not trained
        bench_network.main([*argv, "--variants", "linear,huge"])
