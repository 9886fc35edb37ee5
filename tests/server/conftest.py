"""Server fixtures: the tiny bundle (tests/conftest.py) with adaptation on, a running server."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluation.tune_warp import write_warp
from models.bundle import save_bundle
from models.ds2 import DS2
from models.ensemble import add_member
from server.config import ServerConfig
from tests.conftest import TINY
from tests.server.serving import (
    AUDIO_PCM,
    Running,
    random_punctuator,
    reference_text,
    running,
)


@pytest.fixture(scope="session")
def warped_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle with speaker adaptation on, deciding after 6 frames (0.12 s), so
    streams decide mid-way and the short ones never do."""
    bundle = tmp_path_factory.mktemp("warped") / "tiny"
    shutil.copytree(tiny_bundle, bundle)
    write_warp(bundle, (0.8, 1.0, 1.25), 6)
    return bundle


@pytest.fixture(scope="session")
def ensemble_bundle(warped_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warped bundle with a wider second network (its own weights, no warps) at 0.4."""
    root = tmp_path_factory.mktemp("ensemble")
    bundle = root / "tiny"
    shutil.copytree(warped_bundle, bundle)
    torch.manual_seed(1)
    wide = DS2(dataclasses.replace(TINY, rnn_hidden=48)).eval()
    with torch.no_grad():
        wide.feat_mean.fill_(-7.0)
        wide.feat_std.fill_(3.5)
    add_member(bundle, save_bundle(wide, root / "wide"), 0.4, "wide")
    return bundle


@pytest.fixture(scope="session")
def lookahead_ensemble_bundle(
    warped_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The warped bundle with a second network whose row convolution sees 3 frames further
    ahead (its frames come later), at 0.4."""
    root = tmp_path_factory.mktemp("lookahead_ensemble")
    bundle = root / "tiny"
    shutil.copytree(warped_bundle, bundle)
    torch.manual_seed(2)
    later = DS2(dataclasses.replace(TINY, row_conv_tau=TINY.row_conv_tau + 3)).eval()
    with torch.no_grad():
        later.feat_mean.fill_(-7.0)
        later.feat_std.fill_(3.5)
        later.row_conv.weight.uniform_(-0.5, 0.5)  # it really looks ahead
    add_member(bundle, save_bundle(later, root / "later"), 0.4, "later")
    return bundle


def _small_limits(bundle: Path, seconds: float) -> ServerConfig:
    """Three streams of at most `seconds`, small uploads and chunks, fp32."""
    return ServerConfig(
        dtype="fp32",
        bundle=str(bundle),
        max_streams=3,
        max_upload_mb=0.5,
        max_stream_s=seconds,
        max_file_s=seconds,
        chunk_ms=80,
    )


@pytest.fixture(scope="session")
def server(tiny_bundle: Path) -> Iterator[Running]:
    """A server with small limits, shared by the end-to-end tests (none holds it busy); fp32,
    so every endpoint can be compared with the fp32 offline reference on any CPU."""
    with running(_small_limits(tiny_bundle, 3.0)) as r:
        yield r


@pytest.fixture(scope="session")
def punctuated_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle with a random-weight punctuator (models/punctuation.py)."""
    bundle = tmp_path_factory.mktemp("punctuated") / "tiny"
    shutil.copytree(tiny_bundle, bundle)
    random_punctuator(["p", "y", "smith", "iphone"]).save(bundle)
    return bundle


@pytest.fixture(scope="session")
def punctuated_server(punctuated_bundle: Path) -> Iterator[Running]:
    """A server of the punctuated bundle, limits as `server`'s but for 6 s streams."""
    with running(_small_limits(punctuated_bundle, 6.0)) as r:
        yield r


@pytest.fixture(scope="session")
def expected(tiny_bundle: Path) -> str:
    """The offline transcript of AUDIO_PCM, which every endpoint must reproduce."""
    quantised = np.frombuffer(AUDIO_PCM, "<i2").astype(np.float32) / 32768
    text = reference_text(tiny_bundle, quantised)
    assert len(text.split()) >= 2, "the test bundle should spell several words"
    return text
