"""A bundle with a second network: it hears with the weighted mean of both networks'
probabilities, and a member that cannot join is refused without touching the bundle."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harken_cli import main as harken
from models.bundle import BundleError, load_bundle
from models.card import card
from models.ensemble import add_member, alone_search, load_networks, member_specs
from models.warp import adapted_forward
from tests.conftest import TINY, random_bundle


def _network(root: Path, name: str, seed: int, **changes: Any) -> Path:
    return random_bundle(root / name, dataclasses.replace(TINY, **changes), seed)


@pytest.fixture
def own(tiny_bundle: Path, tmp_path: Path) -> Path:
    bundle = tmp_path / "own"
    shutil.copytree(tiny_bundle, bundle)
    return bundle


def _snapshot(bundle: Path) -> tuple[str, list[str]]:
    return (bundle / "config.json").read_text(), sorted(p.name for p in bundle.iterdir())


def test_the_bundle_hears_the_weighted_mean_of_both_networks(own: Path, tmp_path: Path) -> None:
    wide = _network(tmp_path, "wide", 1, rnn_hidden=48)
    add_member(own, wide, 0.25, "wide")
    assert [(s.path.name, s.weight) for s in member_specs(own)] == [("own", 0.75), ("wide", 0.25)]
    networks = load_networks(own)
    x = torch.randn(2, 61, TINY.features.n_bins) * 3 - 8
    lengths = torch.tensor([61, 40])
    mixed, n = networks.forward(x, lengths)
    (a, _), (b, _) = (adapted_forward(load_bundle(p), x, lengths) for p in (own, wide))
    expected = torch.log(0.75 * a.exp() + 0.25 * b.exp())
    assert n.tolist() == [int(v) for v in adapted_forward(load_bundle(own), x, lengths)[1]]
    for i, t in enumerate(n.tolist()):
        np.testing.assert_allclose(mixed[i, :t], expected[i, :t], atol=1e-5)
        assert not torch.allclose(mixed[i, :t], a[i, :t], atol=1e-3)  # the member counted
    assert networks.num_parameters() == sum(m.num_parameters() for m in networks.models)


@pytest.mark.parametrize(
    ("changes", "weight", "name", "why"),
    [
        ({}, 1.0, "wide", "weight must be in (0, 1)"),
        ({}, 0.0, "wide", "weight must be in (0, 1)"),
        ({"conv_time_kernel": 9}, 0.3, "wide", "look-ahead"),
        ({"time_stride": 3}, 0.3, "wide", "time stride"),
        ({}, 0.3, "../wide", "plain folder name"),
    ],
)
def test_a_member_that_cannot_join_is_refused_and_the_bundle_left_as_it_was(
    own: Path, tmp_path: Path, changes: dict[str, Any], weight: float, name: str, why: str
) -> None:
    before = _snapshot(own)
    member = _network(tmp_path, "member", 2, **changes)
    with pytest.raises(BundleError, match=why.replace("(", r"\(").replace(")", r"\)")):
        add_member(own, member, weight, name)
    assert _snapshot(own) == before
    assert len(load_networks(own).models) == 1


def test_a_member_that_looks_further_ahead_joins_and_is_mixed_frame_by_frame(
    own: Path, tmp_path: Path
) -> None:
    """Offline both networks give one frame per output step whatever their row-convolution
    look-ahead, so the mix is frame-aligned (the server holds the earlier frames back)."""
    later = _network(tmp_path, "later", 9, row_conv_tau=TINY.row_conv_tau + 4)
    add_member(own, later, 0.3, "later")
    networks = load_networks(own)
    x = torch.randn(1, 50, TINY.features.n_bins) * 3 - 8
    mixed, n = networks.forward(x, torch.tensor([50]))
    (a, _), (b, _) = (adapted_forward(load_bundle(p), x, torch.tensor([50])) for p in (own, later))
    t = int(n[0])
    np.testing.assert_allclose(
        mixed[0, :t], torch.log(0.7 * a.exp() + 0.3 * b.exp())[0, :t], atol=1e-5
    )


def test_shares_must_leave_the_bundles_own_network_some_weight(own: Path, tmp_path: Path) -> None:
    add_member(own, _network(tmp_path, "a", 3), 0.6, "a")
    before = _snapshot(own)
    with pytest.raises(BundleError, match="sum to less than 1"):
        add_member(own, _network(tmp_path, "b", 4), 0.4, "b")
    assert _snapshot(own) == before
    with pytest.raises(BundleError, match="exists already"):
        add_member(own, _network(tmp_path, "c", 5), 0.1, "a")
    with pytest.raises(BundleError, match="cannot itself be an ensemble"):
        add_member(_network(tmp_path, "d", 6), own, 0.1, "own")


def test_a_hand_edited_member_outside_the_bundle_is_refused_at_load(
    own: Path, tmp_path: Path
) -> None:
    _network(tmp_path, "outside", 7)
    meta = json.loads((own / "config.json").read_text())
    meta["ensemble"] = {"members": [{"bundle": "../outside", "weight": 0.3}]}
    (own / "config.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="must be a folder inside"):
        load_networks(own)


def test_the_command_adds_a_member_and_the_card_describes_it(
    own: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = _network(tmp_path, "wide", 8, rnn_hidden=48)
    assert harken(["ensemble", str(own), str(wide), "--weight", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "0.700" in out and "0.300" in out and "joined" in out
    with pytest.raises(SystemExit, match="exists already"):
        harken(["ensemble", str(own), str(wide), "--weight", "0.2"])
    assert "ensemble member `wide/` added" in (own / "CARD.md").read_text()
    meta = json.loads((own / "config.json").read_text())
    member_meta = json.loads((own / "wide" / "config.json").read_text())
    text = card(meta, {}, {}, members=[("wide", 0.3, member_meta)])
    assert "- ensemble: this network's per-frame probabilities (0.70 of the mean)" in text
    assert "`wide/` (0.30): 1 x GRU of 48 units" in text


def test_a_bundle_keeps_its_own_search_settings_for_hearing_it_alone(
    own: Path, tmp_path: Path
) -> None:
    """The first member snapshots decoder.json's tuned settings into `ensemble.alone`; a
    re-tune of the mix and a second member leave them, and `ensemble=False` loads one net."""
    tuned = {"alpha": 0.5, "beta": 1.5, "blank_penalty": 0.75, "beam_width": 64}
    (own / "decoder.json").write_text(json.dumps({"unit": "word", "config": tuned}))
    add_member(own, _network(tmp_path, "wide", 1, rnn_hidden=48), 0.3, "wide")
    retuned = {**tuned, "blank_penalty": 1.25}
    (own / "decoder.json").write_text(json.dumps({"unit": "word", "config": retuned}))
    add_member(own, _network(tmp_path, "deep", 2, rnn_layers=2), 0.2, "deep")
    assert alone_search(own) == {"alpha": 0.5, "beta": 1.5, "blank_penalty": 0.75}
    (net,) = load_networks(own, ensemble=False).models
    x, lengths = torch.randn(1, 40, TINY.features.n_bins) * 3 - 8, torch.tensor([40])
    expected, _ = adapted_forward(load_bundle(own), x, lengths)
    torch.testing.assert_close(adapted_forward(net, x, lengths)[0], expected)
    assert len(load_networks(own).models) == 3


def test_settings_for_hearing_alone_must_be_numbers(own: Path, tmp_path: Path) -> None:
    add_member(own, _network(tmp_path, "wide", 1, rnn_hidden=48), 0.3, "wide")
    assert alone_search(own) == {}  # no decoder.json: nothing was tuned
    meta = json.loads((own / "config.json").read_text())
    meta["ensemble"]["alone"] = {"blank_penalty": "high"}
    (own / "config.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="ensemble.alone must map settings to numbers"):
        alone_search(own)
