"""Bundles round-trip exactly, fold BatchNorm without changing outputs, and explain breakage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from models.bundle import (
    BundleError,
    carry_decoder_files,
    decoder_files,
    fold_batchnorm,
    load_bundle,
    save_bundle,
    unfold_batchnorm,
)
from models.ds2 import DS2


def test_round_trip_with_folded_batchnorm(tiny_model: DS2, tmp_path: Path) -> None:
    f = tiny_model.config.features.n_bins
    x, lengths = torch.randn(3, 30, f), torch.tensor([30, 12, 5])
    with torch.no_grad():
        ref, _ = tiny_model(x, lengths)
    save_bundle(tiny_model, tmp_path / "b", provenance={"data": "unit test"})
    loaded = load_bundle(tmp_path / "b")
    assert loaded.folded and loaded.config == tiny_model.config
    assert loaded.provenance == {"data": "unit test"}
    assert not any(".bn." in k for k in loaded.state_dict())
    with torch.no_grad():
        out, _ = loaded(x, lengths)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=0)
    assert "parameters" in (tmp_path / "b" / "CARD.md").read_text()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_loads_in_half_precision(tiny_model: DS2, tmp_path: Path, dtype: torch.dtype) -> None:
    save_bundle(tiny_model, tmp_path)
    model = load_bundle(tmp_path, dtype=dtype)
    assert next(model.parameters()).dtype == dtype


def test_loads_with_int8_recurrent_layers_by_name(tiny_model: DS2, tmp_path: Path) -> None:
    """int8 keeps the saved weights (fp32 state dict) and only swaps the GRU kernel; a model
    it cannot quantize, or an unknown precision, is refused with the reason."""
    save_bundle(tiny_model, tmp_path)
    if tiny_model.config.rnn_type != "gru":
        with pytest.raises(ValueError, match="int8 needs GRU layers"):
            load_bundle(tmp_path, dtype="int8")
        return
    fp32, int8 = load_bundle(tmp_path, dtype="fp32"), load_bundle(tmp_path, dtype="int8")
    assert all(layer.int8 is not None for layer in int8.rnn_stack)
    assert int8.state_dict().keys() == fp32.state_dict().keys()
    f = tiny_model.config.features.n_bins
    x, lengths = torch.randn(2, 40, f), torch.tensor([40, 17])
    with torch.no_grad():
        (want, _), (got, _) = fp32(x, lengths), int8(x, lengths)
    assert not torch.equal(got, want)  # the int8 kernel ran
    assert float((got - want).abs().max()) < 0.1
    with pytest.raises(ValueError, match="precision must be one of"):
        load_bundle(tmp_path, dtype="int4")


def _break(path: Path, what: str) -> None:
    cfg = json.loads((path / "config.json").read_text())
    if what == "no-weights":
        (path / "model.safetensors").unlink()
    elif what == "bad-json":
        (path / "config.json").write_text("{not json")
    elif what == "mismatch":
        cfg["model"]["rnn_hidden"] *= 2
        (path / "config.json").write_text(json.dumps(cfg))
    elif what == "unknown-key":
        cfg["model"]["wings"] = 2
        (path / "config.json").write_text(json.dumps(cfg))
    elif what == "norm":
        cfg["normalization"]["std"] = [0.0] * len(cfg["normalization"]["std"])
        (path / "config.json").write_text(json.dumps(cfg))
    elif what == "corrupt":
        (path / "model.safetensors").write_bytes(b"\x00" * 64)


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("no-weights", "no model.safetensors"),
        ("bad-json", "not valid JSON"),
        ("mismatch", "wrong shapes"),
        ("unknown-key", "unknown model config keys.*wings"),
        ("norm", "std must be positive"),
        ("corrupt", "not a readable safetensors"),
    ],
)
def test_broken_bundle_says_what_is_wrong(
    tiny_model: DS2, tmp_path: Path, what: str, message: str
) -> None:
    save_bundle(tiny_model, tmp_path)
    _break(tmp_path, what)
    with pytest.raises(BundleError, match=message):
        load_bundle(tmp_path)


def test_a_decoder_json_naming_a_missing_file_is_named(tiny_model: DS2, tmp_path: Path) -> None:
    """What a fine-tune's export copies (`carry_decoder_files`) must all be there: a bundle
    missing its LM is refused with the file named, before anything is copied."""
    save_bundle(tiny_model, tmp_path / "a")
    doc = {"lm": "lm.binary", "unigrams": "unigrams.txt", "config": {}}
    (tmp_path / "a" / "decoder.json").write_text(json.dumps(doc))
    (tmp_path / "a" / "unigrams.txt").write_text("a\n")
    with pytest.raises(BundleError, match="missing from it \\['lm.binary'\\]"):
        carry_decoder_files(tmp_path / "a", tmp_path / "b")
    assert not (tmp_path / "b").exists()
    assert decoder_files(tmp_path / "b") == []  # no decoder.json: nothing to carry


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not a directory"):
        load_bundle(tmp_path / "nope")


def test_unfolded_bundle_computes_what_the_bundle_computes(tiny_model: DS2) -> None:
    """Fine-tuning starts from a bundle: its trainable copy must not start somewhere else."""
    folded = fold_batchnorm(tiny_model)
    g, f = torch.Generator().manual_seed(3), tiny_model.config.features.n_bins
    calibration = [torch.randn(n, f, generator=g) * 2 for n in (40, 25, 60, 33)]
    model = unfold_batchnorm(folded, calibration)
    assert not model.folded and model.config == folded.config
    x, lengths = torch.randn(2, 30, f, generator=g), torch.tensor([30, 17])
    with torch.no_grad():
        want, _ = folded(x, lengths)
        got, _ = model.eval()(x, lengths)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        # in training mode BatchNorm uses the batch's own statistics; on the calibration
        # audio those are the ones measured, so the outputs stay close
        batch = torch.stack([c[:25] for c in calibration])
        ref, _ = folded(batch, torch.full((4,), 25))
        train_out, _ = model.train()(batch, torch.full((4,), 25))
    assert (train_out.exp() - ref.exp()).abs().max() < 0.1
    with pytest.raises(ValueError, match="not folded"):
        unfold_batchnorm(model, calibration)
