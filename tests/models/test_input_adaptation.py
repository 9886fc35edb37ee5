"""Input adaptation: a recording's fitted transforms make the network surer of what it hears,
fit each warped copy as if alone, leave silence alone, and the offline path hears the
adapted copy beside the plain one."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

from models.config import ModelConfig
from models.ds2 import DS2
from models.input_adaptation import (
    AdaptConfig,
    InputAdapter,
    InputTransforms,
    _Adam,
    fit_transforms,
    speech_entropy,
)
from models.warp import adapted_forward, log_mean, warp_features
from tests.models.conftest import TINY_CONFIGS, randomize

F32 = npt.NDArray[np.float32]


def _model(seed: int = 0, **changes: Any) -> DS2:
    torch.manual_seed(seed)
    model = randomize(DS2(dataclasses.replace(TINY_CONFIGS["2d-gru"], **changes)), seed)
    with torch.no_grad():
        model.output.bias[0] -= 2.0  # few blanks: random weights then "speak" most frames
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _feats(model: DS2, frames: int = 120, seed: int = 0) -> F32:
    rng = np.random.default_rng(seed)
    mean, std = model.feat_mean.numpy(), model.feat_std.numpy()
    x = mean + std * rng.standard_normal((frames, len(mean)))
    return np.asarray(x, np.float32)


def _speech_entropy(model: DS2, feats: torch.Tensor) -> float:
    with torch.no_grad():
        lp, _ = model(feats[None], torch.tensor([len(feats)]))
    return float(speech_entropy(lp)[0][0])


def test_the_hand_written_adam_step_is_torchs() -> None:
    torch.manual_seed(0)
    target = torch.randn(3, 7)
    ours, theirs = torch.zeros(3, 7), torch.zeros(3, 7, requires_grad=True)
    adam, opt = _Adam.start([ours]), torch.optim.Adam([theirs], lr=0.05)
    for _ in range(6):
        loss = ((theirs - target) ** 3).abs().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        adam.update([ours], [3 * (ours - target) * (ours - target).abs()], 0.05)
    torch.testing.assert_close(ours, theirs.detach(), rtol=1e-5, atol=1e-6)


def test_the_fitted_transforms_make_the_network_surer_of_what_it_hears() -> None:
    model = _model()
    feats = _feats(model)
    factors = (0.9, 1.1)
    fitted = fit_transforms(model, feats, factors)
    assert fitted.gain.shape == fitted.offset.shape == (2, model.config.features.n_bins)
    x = torch.from_numpy(feats)
    for k, alpha in enumerate(factors):
        warped = warp_features(x, alpha, model.config.features)
        before = _speech_entropy(model, warped)
        after = _speech_entropy(model, fitted.apply(warped, k))
        assert after < before - 1e-3


def test_each_warped_copy_is_fitted_as_if_alone() -> None:
    model = _model()
    feats = _feats(model)
    both = fit_transforms(model, feats, (0.9, 1.1))
    alone = fit_transforms(
        model, warp_features(torch.from_numpy(feats), 1.1, model.config.features).numpy(), ()
    )
    np.testing.assert_allclose(both.gain[1], alone.gain[0], atol=1e-5)
    np.testing.assert_allclose(both.offset[1], alone.offset[0], atol=1e-4)


def test_silence_the_network_hears_no_speech_in_is_left_as_it_is() -> None:
    model = _model()
    with torch.no_grad():
        model.output.bias[0] += 100.0  # every frame's best symbol is the blank
    fitted = fit_transforms(model, _feats(model), (0.9, 1.1))
    np.testing.assert_array_equal(fitted.gain, 1.0)
    np.testing.assert_array_equal(fitted.offset, 0.0)


def test_the_fit_reads_at_most_max_seconds_of_a_recording() -> None:
    model = _model()
    feats = _feats(model, frames=200)
    config = AdaptConfig(max_seconds=0.8)  # 80 frames of 10 ms
    long = fit_transforms(model, feats, (), config)
    short = fit_transforms(model, feats[:80], (), config)
    np.testing.assert_array_equal(long.gain, short.gain)
    np.testing.assert_array_equal(long.offset, short.offset)
    assert not np.allclose(long.gain, fit_transforms(model, feats, ()).gain)


@pytest.mark.parametrize("merge", ["choose", "mean"])
def test_offline_each_copy_hears_its_plain_and_adapted_input_averaged(merge: str) -> None:
    model = _model(warp_factors=(0.9, 1.1), warp_merge=merge, warp_decide_frames=4).eval()
    feats = [_feats(model, 90, seed=1), _feats(model, 60, seed=2)]
    fitted = [fit_transforms(model, f, model.config.warp_factors) for f in feats]
    batch = torch.zeros(2, 90, feats[0].shape[1])
    for i, f in enumerate(feats):
        batch[i, : len(f)] = torch.from_numpy(f)
    lengths = torch.tensor([90, 60])
    out, n = adapted_forward(model, batch, lengths, fitted)
    plain, _ = adapted_forward(model, batch, lengths)
    assert not torch.allclose(out[0, : n[0]], plain[0, : n[0]], atol=1e-3)
    if merge == "mean":  # the four rows' mean, whichever way it is computed
        x = torch.from_numpy(feats[1])
        rows = []
        for k, alpha in enumerate(model.config.warp_factors):
            warped = warp_features(x, alpha, model.config.features)
            for copy in (warped, fitted[1].apply(warped, k)):
                lp, m = model(copy[None], torch.tensor([len(copy)]))
                rows.append(lp[0, : int(m[0])].numpy())
        np.testing.assert_allclose(out[1, : int(n[1])].numpy(), log_mean(rows), atol=1e-5)


def test_the_adapter_loads_its_fp32_copy_once_even_in_inference_mode() -> None:
    model = _model()
    loads: list[int] = []

    def load() -> DS2:
        loads.append(1)
        return _model().to(torch.bfloat16)

    adapter = InputAdapter(load, (0.9, 1.1), AdaptConfig(steps=2))
    with torch.inference_mode():  # as `harken eval` calls it
        first = adapter.fit(_feats(model))
        second = adapter.fit(_feats(model, seed=3))
    assert len(loads) == 1 and adapter.candidates == 2
    assert isinstance(first, InputTransforms) and first.candidates == second.candidates == 2
    assert not np.allclose(first.gain, 1.0)


def test_a_model_config_without_warps_fits_one_transform() -> None:
    model = _model()
    assert model.config.warp_factors == ModelConfig().warp_factors == ()
    assert fit_transforms(model, _feats(model), ()).candidates == 1


def test_a_long_recording_fitted_in_pieces_is_fitted_on_every_piece_alike() -> None:
    """In pieces, a recording that says the same piece twice fits that piece's transform
    (each copy's loss is the mean over all its pieces), and a tail shorter than a piece
    counts only its own frames."""
    model = _model()
    piece = _feats(model, frames=80)
    pieces = AdaptConfig(piece_seconds=0.8)  # 80 frames of 10 ms
    twice = fit_transforms(model, np.concatenate([piece, piece]), (0.9, 1.1), pieces)
    once = fit_transforms(model, piece, (0.9, 1.1))
    np.testing.assert_allclose(twice.gain, once.gain, atol=1e-5)
    np.testing.assert_allclose(twice.offset, once.offset, atol=1e-4)
    whole = fit_transforms(model, np.concatenate([piece, piece[:40]]), (), AdaptConfig())
    cut = fit_transforms(model, np.concatenate([piece, piece[:40]]), (), pieces)
    assert not np.allclose(cut.gain, whole.gain, atol=1e-6)  # two pieces, not one sequence
    assert np.isfinite(cut.gain).all() and np.isfinite(cut.offset).all()
