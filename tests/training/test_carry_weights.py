"""Weights carried to and from a lent GPU machine keep their names, dtypes and values."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "carry_weights.py"


def _module():
    spec = importlib.util.spec_from_file_location("carry_weights", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bundle(tmp_path: Path) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    weights = {
        "rnn.weight": torch.randn(96, 64, generator=g),  # large matrix: int8 on the way out
        "rnn.bias": torch.randn(96, generator=g),
        "bn.num_batches_tracked": torch.tensor(7, dtype=torch.int64),
    }
    (tmp_path / "src").mkdir()
    save_file(weights, tmp_path / "src" / "model.safetensors")
    (tmp_path / "src" / "config.json").write_text("{}")
    return weights


def test_half_and_full_round_trip_within_fp16(tmp_path: Path) -> None:
    cw, weights = _module(), _bundle(tmp_path)
    cw.half(tmp_path / "src", tmp_path)
    assert (tmp_path / cw.HALF).stat().st_size < (
        tmp_path / "src" / "model.safetensors"
    ).stat().st_size
    (tmp_path / "back").mkdir()
    cw.full(tmp_path, tmp_path / "back")
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert back.keys() == weights.keys()
    for name, t in weights.items():
        assert back[name].dtype == t.dtype
        torch.testing.assert_close(back[name], t, rtol=1e-3, atol=1e-3)
    assert back["bn.num_batches_tracked"].item() == 7


def test_pack_and_unpack_within_one_int8_step(tmp_path: Path) -> None:
    cw, weights = _module(), _bundle(tmp_path)
    cw.pack(tmp_path / "src", tmp_path)
    (tmp_path / "back").mkdir()
    cw.unpack(tmp_path, tmp_path / "back")
    back = load_file(tmp_path / "back" / "model.safetensors")
    m = weights["rnn.weight"]
    step = m.abs().amax(1, keepdim=True) / 127
    assert back["rnn.weight"].dtype == torch.float32
    assert ((back["rnn.weight"] - m).abs() <= step / 2 + 1e-6).all()
    assert not torch.equal(back["rnn.weight"], m)  # it really was quantised
