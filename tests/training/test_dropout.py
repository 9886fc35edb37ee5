"""Dropout between the recurrent layers: it acts only while training, and the BatchNorm
statistics a model is scored and served with are measured without it."""

from __future__ import annotations

import pytest
import torch

from models.ds2 import DS2, SequenceBatchNorm
from tests.models.conftest import TINY_CONFIGS
from training.dropout import recalibrated

MODEL = TINY_CONFIGS["2d-gru"]


def _features(seed: int, lengths: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    bins = MODEL.features.n_bins
    return [torch.randn(n, bins, generator=g) * 2 + 1 for n in lengths]


def _batch(features: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(f) for f in features])
    return torch.nn.utils.rnn.pad_sequence(features, batch_first=True), lengths


@torch.no_grad()
def test_dropout_drops_only_in_training_and_recalibration_undoes_its_statistics() -> None:
    torch.manual_seed(0)
    model = DS2(MODEL)
    model.dropout = 0.5
    calibration = _features(1, [40, 33, 25, 40])
    x, n = _batch(calibration)
    model.train()
    for _ in range(30):  # running statistics that have seen only dropped inputs
        model(x, n)
    assert not torch.equal(model(x, n)[0], model(x, n)[0])  # a new mask every pass
    model.eval()
    torch.testing.assert_close(model(x, n)[0], model(x, n)[0])  # eval drops nothing

    # one calibration batch: its statistics are the running ones, so the recalibrated
    # model in eval mode computes what the undropped network computes in training mode
    fixed = recalibrated(model, calibration, batch_size=len(calibration))
    assert fixed.dropout == 0 and not fixed.training and model.dropout == 0.5
    undropped = DS2(MODEL)
    undropped.load_state_dict(model.state_dict())
    want = undropped.train()(x, n)[0]
    mask = torch.arange(want.shape[1])[None, :] < fixed.output_lengths(n)[:, None]
    torch.testing.assert_close(fixed(x, n)[0][mask], want[mask], atol=1e-4, rtol=0)
    # the statistics measured under dropout were not those: the step matters
    stale = model.eval()(x, n)[0]
    assert (stale[mask] - want[mask]).abs().max() > 1e-2

    # several batches: each layer's statistics are the mean of the batches' own
    norms = [m for m in fixed.modules() if isinstance(m, SequenceBatchNorm)]
    assert all(m.momentum == 0.05 for m in norms)  # the training momentum is kept
    halves = recalibrated(model, calibration, batch_size=2)
    first = recalibrated(model, calibration[:2], batch_size=2)
    second = recalibrated(model, calibration[2:], batch_size=2)
    for name, value in halves.state_dict().items():
        if name.endswith("running_mean"):
            want_mean = (first.state_dict()[name] + second.state_dict()[name]) / 2
            torch.testing.assert_close(value, want_mean, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="calibration"):
        recalibrated(model, [])
