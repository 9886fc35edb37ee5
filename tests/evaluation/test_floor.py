"""The compute floor: the FLOP count per audio second agrees with torch's, the capacity
arithmetic is the issue's formula, and a small run writes its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import harken_cli
from evaluation import bench_model as bench
from evaluation import floor
from evaluation.flops import (
    ELEMENTWISE_ALLOWANCE,
    analytic_flops,
    counted_flops,
    flops_per_audio_second,
)
from tests.conftest import TINY
from tests.models.conftest import TINY_CONFIGS

CONFIGS = {**TINY_CONFIGS, "bundle": TINY}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("batch", [1, 3])
def test_flops_of_one_second_match_torch_within_the_elementwise_allowance(
    name: str, batch: int
) -> None:
    cfg = CONFIGS[name]
    frames = 100 // cfg.time_stride * cfg.time_stride  # about one second of 10 ms frames
    model = bench.build_model(cfg, torch.float32, torch.device("cpu"))
    flop_counter, pointwise = counted_flops(model, frames, batch)
    analytic = analytic_flops(cfg, frames, batch)
    elementwise = analytic.pop("elementwise")
    assert sum(analytic.values()) == flop_counter  # FlopCounterMode: the matrix products
    assert abs(elementwise - pointwise) <= ELEMENTWISE_ALLOWANCE * pointwise
    assert elementwise > 0.9 * pointwise  # the estimate covers the ops, not just a few
    # per audio second, scaled to the seconds those frames hold
    seconds = frames * cfg.features.hop_ms / 1000
    per_second = sum(flops_per_audio_second(cfg).values())
    assert per_second * seconds * batch == pytest.approx(flop_counter + elementwise, rel=1e-9)


def test_capacity_is_cores_over_core_seconds_per_stream_second() -> None:
    # 4 ms per step of 8 streams, 160 ms chunks: 6.25 steps per second of audio, so one
    # stream's second costs 4 * 6.25 / 8 = 3.125 core-ms
    one = floor.capacity(0.004, threads=1, chunk_s=0.16, batch=8, cores=2)
    assert one["core_ms_per_audio_s"] == pytest.approx(3.125)
    assert one["streams_on_cores"] == pytest.approx(2 / 0.003125)
    assert one["streams_one_thread"] == pytest.approx(1 / 0.003125)
    two = floor.capacity(
        0.004, threads=2, chunk_s=0.16, batch=8, cores=2
    )  # wall time on both cores
    assert two["core_ms_per_audio_s"] == pytest.approx(6.25)
    assert "streams_one_thread" not in two


def test_gemm_shapes_are_the_steps_products() -> None:
    shapes = floor.gemm_shapes(TINY, positions=4, batch=3)
    h = TINY.rnn_hidden
    assert shapes == {"recurrent": (3, h, 3 * h), "input": (12, h, 3 * h)}


def test_small_run_writes_floor_json_and_md(tiny_bundle: Path, tmp_path: Path) -> None:
    args = ["floor", "--bundle", str(tiny_bundle), "--out", str(tmp_path), "--batches", "1,2"]
    args += ["--chunk-ms", "80", "--threads", "1", "--target-s", "0.01"]
    args += ["--precisions", "fp32,int8"]
    assert harken_cli.main(args) == 0
    result = json.loads((tmp_path / "floor.json").read_text())
    assert result["flops"]["analytic_matmul"] == result["flops"]["flop_counter"]
    assert [(r["precision"], r["batch"]) for r in result["steps"]] == [
        ("fp32", 1),
        ("fp32", 2),
        ("int8", 1),
        ("int8", 2),
    ]
    assert [r["batch"] for r in result["runner"]] == [1, 2]
    assert {r["shape"] for r in result["gemm"]} == {"recurrent", "input"}
    assert {r["precision"] for r in result["gemm"]} == {"fp32"}  # int8 has no F.linear
    assert all(r["gflops"] > 0 for r in result["gemm"])
    assert all(r["step_ms"] > 0 for r in result["steps"] + result["runner"])
    assert result["meta"]["torch"] == torch.__version__ and result["meta"]["cpu"]
    text = (tmp_path / "floor.md").read_text()
    assert "| **total** |" in text and "| step | int8 | 1 | 80 ms | 2 |" in text
    assert "## The floor" in text
