"""Fixtures shared across packages: a tiny random bundle (real layers, random weights)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.bundle import save_bundle
from models.config import ModelConfig
from models.ds2 import DS2

TINY = ModelConfig(
    conv_layers=1,
    conv_channels=4,
    conv_freq_kernel=21,
    conv_time_kernel=5,
    rnn_layers=1,
    rnn_hidden=32,
    row_conv_tau=2,
)


def random_bundle(path: Path, config: ModelConfig, seed: int) -> Path:
    """A bundle of `config` with random weights and normalisation for log-spectra near -8."""
    torch.manual_seed(seed)
    model = DS2(config).eval()
    with torch.no_grad():
        model.feat_mean.fill_(-8.0)
        model.feat_std.fill_(3.0)
    return save_bundle(model, path)


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = DS2(TINY).eval()
    with torch.no_grad():
        model.feat_mean.fill_(-8.0)
        model.feat_std.fill_(3.0)
        model.output.bias[1] += 0.5  # more spaces: random weights then spell several "words"
    return save_bundle(model, tmp_path_factory.mktemp("bundle") / "tiny")
