"""The benchmark's analytic FLOP count is what torch counts, and its report renders."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from evaluation import bench_model as bench
from models import streaming
from models.config import ModelConfig
from tests.models.conftest import TINY_CONFIGS

CONFIGS = {**TINY_CONFIGS, **{f"bench-{k}": v for k, v in bench.VARIANTS.items()}}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize(("frames", "batch"), [(12, 1), (24, 3)])
def test_chunk_flops_match_torch_flop_counter(name: str, frames: int, batch: int) -> None:
    cfg: ModelConfig = CONFIGS[name]
    frames -= frames % cfg.time_stride
    model = bench.build_model(cfg, torch.float32, torch.device("cpu"))
    state = streaming.init_state(model, batch)
    # past the pre-roll first: a fresh stream's chunk that is all pre-roll skips the recurrence;
    # the analytic count is that of a stream in full flow
    _, state = streaming.step(model, torch.randn(batch, 48, cfg.features.n_bins), state)
    feats = torch.randn(batch, frames, cfg.features.n_bins)
    with FlopCounterMode(display=False) as counter:
        streaming.step(model, feats, state)
    assert sum(bench.chunk_flops(cfg, frames, batch).values()) == counter.get_total_flops()


def test_small_run_writes_a_report(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(
        ["--out", str(tmp_path), "--variants", "1d", "--precisions", "fp32", "--chunks", "4"]
        + ["--batches", "1,2", "--threads", "1", "--target-s", "0.01", "--blas-hidden", "32"]
    )
    assert bench.main(args) == 0
    text = (tmp_path / "results.md").read_text()
    assert "| 1d | 4 (40 ms) | 2 |" in text and "B1 / B8" in text
