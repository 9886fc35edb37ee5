"""`harken bench-workers` on the tiny bundle: both kinds of worker decode every stream."""

from __future__ import annotations

import json
from pathlib import Path

import harken_cli
from tests.evaluation.test_cli_eval import make_manifest


def test_threads_and_processes_are_both_measured(tiny_bundle: Path, tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path)
    out = tmp_path / "out"
    argv = ["bench-workers", "--bundle", str(tiny_bundle), "--manifest", str(manifest)]
    assert harken_cli.main([*argv, "--workers", "1,2", "--repeats", "1", "--out", str(out)]) == 0
    results = json.loads((out / "workers.json").read_text())["results"]
    assert {(r["kind"], r["workers"]) for r in results} == {
        (kind, w) for kind in ("thread", "process") for w in (1, 2)
    }
    assert all(r["audio_s_per_s"] > 0 for r in results)
    assert "| process | 2 |" in (out / "workers.md").read_text()
