"""Small random models for tests: real layers, randomised statistics so BN matters."""

from __future__ import annotations

import pytest
import torch

from models.config import FeatureConfig, ModelConfig
from models.ds2 import DS2, SequenceBatchNorm


def randomize(model: DS2, seed: int = 0) -> DS2:
    """Give BatchNorm running stats, normalisation and row conv non-trivial values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, SequenceBatchNorm):
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=g) * 0.2)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * 0.3 + 1)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)
        model.row_conv.weight.copy_(torch.randn(model.row_conv.weight.shape, generator=g) * 0.5)
        for layer in model.rnn_stack:  # residual layers: a trained gain, not the pass-through
            if layer.gain is not None:
                layer.gain.copy_(torch.randn(layer.gain.shape, generator=g) * 0.5)
        model.feat_mean.copy_(torch.randn(model.feat_mean.shape, generator=g))
        model.feat_std.copy_(torch.rand(model.feat_std.shape, generator=g) + 0.5)
    return model.eval()


TINY_CONFIGS = {
    "2d-gru": ModelConfig(
        conv_layers=2,
        conv_channels=4,
        conv_freq_kernel=11,
        conv_time_kernel=5,
        rnn_layers=2,
        rnn_hidden=16,
        row_conv_tau=3,
    ),
    "1d-rnn": ModelConfig(
        conv_type="1d",
        conv_layers=1,
        conv_channels=12,
        conv_time_kernel=3,
        rnn_type="rnn",
        rnn_layers=1,
        rnn_hidden=16,
        row_conv_tau=2,
    ),
    "3conv-stride3": ModelConfig(
        conv_layers=3,
        conv_channels=3,
        conv_freq_kernel=9,
        conv_time_kernel=7,
        time_stride=3,
        rnn_layers=1,
        rnn_hidden=8,
        row_conv_tau=0,
    ),
    "mel-1d-stride3": ModelConfig(
        features=FeatureConfig(n_mels=24),
        conv_type="1d",
        conv_layers=1,
        conv_channels=10,
        conv_time_kernel=5,
        time_stride=3,
        rnn_layers=2,
        rnn_residual_layers=1,  # the top layer adds its input back (a deepened network's)
        rnn_hidden=12,
        row_conv_tau=2,
    ),
}


@pytest.fixture(params=sorted(TINY_CONFIGS))
def tiny_model(request: pytest.FixtureRequest) -> DS2:
    torch.manual_seed(0)
    return randomize(DS2(TINY_CONFIGS[request.param]))
