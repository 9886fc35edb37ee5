"""Speaker adaptation by frequency warp: the confident candidate wins (or every candidate is
averaged), chunking never changes the output, the offline path equals plain forward when off,
bundles carry and validate it."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import soundfile as sf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation import tune_warp
from models.bundle import load_bundle, save_bundle
from models.config import FeatureConfig, ModelConfig, WarpMerge
from models.ds2 import DS2
from models.features import bin_positions
from models.warp import (
    WarpChoice,
    adapted_forward,
    frame_entropy,
    log_mean,
    select,
    warp_features,
    warp_frequencies,
    warp_matrix,
)
from tests.models.conftest import TINY_CONFIGS, randomize

F32 = npt.NDArray[np.float32]
V = 5


def _peaked(t: int, symbol: int, confidence: float) -> F32:
    """[t, V] log-probs putting `confidence` on `symbol` and the rest spread evenly."""
    p = np.full((t, V), (1 - confidence) / (V - 1))
    p[:, symbol] = confidence
    return np.log(p).astype(np.float32)


def test_the_more_confident_candidate_supplies_the_frames_and_is_kept() -> None:
    unsure, sure = _peaked(30, 1, 0.4), _peaked(30, 2, 0.95)
    choice = WarpChoice.start(2)
    out = select([unsure, sure], choice, decide_frames=10)
    np.testing.assert_array_equal(out, sure)
    assert choice.chosen == 1 and choice.active == [1]
    # decided: only the kept candidate runs from now on
    np.testing.assert_array_equal(select([unsure[:4]], choice, 10), unsure[:4])


def test_before_deciding_each_frame_follows_the_running_entropy() -> None:
    # candidate 0 is sure for 3 frames and then lost; 1 is steady: 0 leads, then 1 takes over
    a = np.concatenate([_peaked(3, 1, 0.99), _peaked(7, 1, 0.21)])
    b = _peaked(10, 2, 0.7)
    choice = WarpChoice.start(2)
    out = select([a, b], choice, decide_frames=100)
    ent = np.cumsum(np.stack([frame_entropy(a), frame_entropy(b)]), axis=1)
    leader = np.argmin(ent, axis=0)
    assert leader[0] == 0 and leader[-1] == 1
    np.testing.assert_array_equal(out, np.where((leader == 0)[:, None], a, b))
    assert choice.chosen is None and choice.frames == 10


def test_silence_does_not_count_towards_the_choice() -> None:
    # 60 frames of silence where candidate 0 is the surer blank, then speech where 1 is surer
    silence = [_peaked(60, 0, 0.999), _peaked(60, 0, 0.9)]
    speech = [_peaked(30, 1, 0.4), _peaked(30, 2, 0.95)]
    outs = [np.concatenate([s, p]) for s, p in zip(silence, speech, strict=True)]
    choice = WarpChoice.start(2, (0.8, 1.0))
    out = select(outs, choice, decide_frames=10)
    assert choice.chosen == 1  # decided on the 10 speech frames, not on the silence
    np.testing.assert_array_equal(out[:60], outs[1][:60])  # nothing heard yet: factor 1.0
    np.testing.assert_array_equal(out[60:], outs[1][60:])


def test_a_stream_that_never_speaks_stays_undecided() -> None:
    choice = WarpChoice.start(2, (1.0, 1.2))
    out = select([_peaked(300, 0, 0.99), _peaked(300, 0, 0.999)], choice, decide_frames=10)
    assert choice.chosen is None and choice.frames == 0
    np.testing.assert_array_equal(out, _peaked(300, 0, 0.99))  # the neutral factor's frames


def test_mean_merge_averages_every_candidate_and_never_decides() -> None:
    unsure, sure = _peaked(300, 1, 0.4), _peaked(300, 2, 0.95)
    choice = WarpChoice.start(2, (0.8, 1.0), "mean")
    out = select([unsure, sure], choice, decide_frames=10)
    expected = np.log((np.exp(unsure.astype(np.float64)) + np.exp(sure)) / 2)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0, atol=1e-5)  # still distributions
    assert choice.chosen is None and choice.active == [0, 1]  # both run to the end
    np.testing.assert_allclose(log_mean([sure, sure]), sure, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(0, 40), max_size=5),
    decide=st.integers(1, 50),
    merge=st.sampled_from(["choose", "mean"]),
)
def test_chunked_selection_equals_whole_selection(
    seed: int, cuts: list[int], decide: int, merge: WarpMerge
) -> None:
    rng = np.random.default_rng(seed)
    outs = [
        np.log(rng.dirichlet(np.full(V, 0.3 + k), size=40)).astype(np.float32) for k in range(3)
    ]
    whole_choice = WarpChoice.start(3, merge=merge)
    whole = select(outs, whole_choice, decide)
    choice, pieces, start = WarpChoice.start(3, merge=merge), [], 0
    for end in [*sorted(cuts), 40]:
        pieces.append(
            select([o[start:end] for o in (outs[k] for k in choice.active)], choice, decide)
        )
        start = max(start, end)
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    assert choice.chosen == whole_choice.chosen


def test_warp_moves_a_formant_and_one_is_identity() -> None:
    spec = np.zeros((1, 161), np.float32)
    spec[0, 60] = 1.0
    linear = FeatureConfig()
    assert int(np.argmax(warp_frequencies(spec, 0.8, linear))) == 48
    assert int(np.argmax(warp_frequencies(spec, 1.2, linear))) == 72
    np.testing.assert_allclose(spec @ warp_matrix(bin_positions(linear), 1.0), spec, atol=1e-6)
    t = torch.from_numpy(spec)
    np.testing.assert_allclose(
        warp_features(t, 0.8, linear).numpy(), warp_frequencies(spec, 0.8, linear)
    )


def test_warp_on_mel_bins_moves_a_formant_by_its_frequency() -> None:
    # a peak at the mel bin centred near 1 kHz lands on the bin nearest alpha times its centre
    mel = FeatureConfig(n_mels=80)
    hz = np.asarray(bin_positions(mel)) * 8000.0
    spec = np.zeros((1, 80), np.float32)
    peak = int(np.argmin(abs(hz - 1000)))
    spec[0, peak] = 1.0
    for alpha in (0.8, 1.2):
        moved = int(np.argmax(warp_frequencies(spec, alpha, mel)))
        assert moved == int(np.argmin(abs(hz - hz[peak] * alpha)))
    np.testing.assert_allclose(spec @ warp_matrix(bin_positions(mel), 1.0), spec, atol=1e-6)


def _model(**warp: object) -> DS2:
    torch.manual_seed(0)
    return randomize(DS2(dataclasses.replace(TINY_CONFIGS["1d-rnn"], **warp)))  # type: ignore[arg-type]


@torch.no_grad()
def test_adapted_forward_without_factors_is_plain_forward_and_with_them_picks_per_utterance() -> (
    None
):
    feats = torch.randn(3, 50, 161) * 2 - 8
    lengths = torch.tensor([50, 37, 20])
    plain = _model()
    lp, n = plain(feats, lengths)
    alp, an = adapted_forward(plain, feats, lengths)
    assert torch.equal(lp, alp) and torch.equal(n, an)

    warped = _model(warp_factors=(0.8, 1.0, 1.25), warp_decide_frames=5)
    wlp, wn = adapted_forward(warped, feats, lengths)
    for i in range(3):
        t = int(wn[i])
        singles = [
            warped(
                warp_features(feats[i : i + 1, : int(lengths[i])], a, warped.config.features),
                lengths[i : i + 1],
            )[0][0]
            for a in (0.8, 1.0, 1.25)
        ]
        expected = select([s.numpy() for s in singles], WarpChoice.start(3), 5)
        np.testing.assert_allclose(wlp[i, :t].numpy(), expected, atol=1e-5)

    averaged = _model(warp_factors=(0.8, 1.0, 1.25), warp_merge="mean")
    alp, an = adapted_forward(averaged, feats, lengths)
    t = int(an[1])
    singles = [
        averaged(warp_features(feats[1:2, : int(lengths[1])], a, averaged.config.features),
                 lengths[1:2])[0][0].numpy()
        for a in (0.8, 1.0, 1.25)
    ]  # fmt: skip
    np.testing.assert_allclose(alp[1, :t].numpy(), log_mean(singles)[:t], atol=1e-5)


def test_config_checks_and_round_trips_warp_factors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="warp_factors must be distinct numbers from 0.5 to 2.0"):
        ModelConfig(warp_factors=(0.8, 0.8))
    with pytest.raises(ValueError, match="warp_factors must be distinct numbers from 0.5 to 2.0"):
        ModelConfig(warp_factors=(3.0,))
    with pytest.raises(ValueError, match="warp_decide_frames must be >= 1"):
        ModelConfig(warp_decide_frames=0)
    with pytest.raises(ValueError, match="warp_merge must be one of"):
        ModelConfig(warp_merge="median")  # type: ignore[arg-type]
    merged = save_bundle(_model(warp_factors=(0.8, 1.0), warp_merge="mean"), tmp_path / "m")
    assert load_bundle(merged).config.warp_merge == "mean"
    model = _model(warp_factors=(0.75, 1.0))
    bundle = save_bundle(model, tmp_path / "b")
    assert json.loads((bundle / "config.json").read_text())["model"]["warp_factors"] == [0.75, 1.0]
    assert load_bundle(bundle).config.warp_factors == (0.75, 1.0)
    # a bundle written before adaptation existed has no such keys and loads with it off
    meta = json.loads((bundle / "config.json").read_text())
    del meta["model"]["warp_factors"], meta["model"]["warp_decide_frames"]
    (bundle / "config.json").write_text(json.dumps(meta))
    assert load_bundle(bundle).config.warp_factors == ()


def test_best_trial_needs_a_real_gain_to_pay_for_more_factors() -> None:
    T = tune_warp.Trial
    trials = [T((), 0.40, 0.8), T((0.8, 1.0), 0.35, 0.7), T((0.7, 0.8, 1.0), 0.347, 0.7)]
    assert tune_warp.best_trial(trials, min_gain=0.005).factors == (0.8, 1.0)
    assert tune_warp.best_trial(trials, min_gain=0.0).factors == (0.7, 0.8, 1.0)
    assert tune_warp.best_trial([T((), 0.3, 0.6), T((0.8, 1.0), 0.31, 0.6)], 0.0).factors == ()
    # two factors fall just short of paying for themselves against "off"; three beat "off" by
    # more than the gain but two by less: still not worth a third copy (runs/formant's case)
    trials = [T((), 0.2109, 0.6), T((0.8, 1.0), 0.2059, 0.6), T((0.75, 0.85, 1.0), 0.2046, 0.6)]
    assert tune_warp.best_trial(trials, min_gain=0.005).factors == ()
    assert tune_warp.best_trial(trials, min_gain=0.002).factors == (0.8, 1.0)


def test_tune_warp_writes_its_choice_into_the_bundle(tmp_path: Path) -> None:
    bundle = save_bundle(_model(), tmp_path / "b")
    rng = np.random.default_rng(0)
    lines = []
    for i in range(3):
        sf.write(tmp_path / f"{i}.wav", (0.1 * rng.standard_normal(8000)).astype(np.float32), 16000)
        lines.append(json.dumps({"audio": f"{i}.wav", "text": "a b"}))
    (tmp_path / "dev.jsonl").write_text("\n".join(lines) + "\n")
    parser = __import__("argparse").ArgumentParser()
    tune_warp.add_arguments(parser)
    base = ["--bundle", str(bundle), "--manifest", str(tmp_path / "dev.jsonl")]
    before = (bundle / "config.json").read_text()
    dry = parser.parse_args([*base, "--candidates", "off", "0.8,1.0", "--dry-run"])
    assert tune_warp.main(dry) == 0 and (bundle / "config.json").read_text() == before
    # min gain -1: the larger set wins whatever it scores, so the write is observable
    args = parser.parse_args(
        [*base, "--candidates", "off", "0.8,1.0", "--min-gain", "-1", "--decide-frames", "7"]
    )
    assert tune_warp.main(args) == 0
    cfg = load_bundle(bundle).config
    assert cfg.warp_factors == (0.8, 1.0) and cfg.warp_decide_frames == 7
    assert cfg.warp_merge == "choose"
    # --merge mean scores the sets averaged and keeps that; a later run keeps the bundle's own
    assert (
        tune_warp.main(parser.parse_args([*base, "--candidates", "0.8,1.0", "--merge", "mean"]))
        == 0
    )
    assert load_bundle(bundle).config.warp_merge == "mean"
    assert tune_warp.main(parser.parse_args([*base, "--candidates", "0.8,1.0"])) == 0
    assert load_bundle(bundle).config.warp_merge == "mean"
    with pytest.raises(ValueError, match="warp_factors must be distinct"):
        tune_warp.main(parser.parse_args([*base, "--candidates", "0.8,9"]))
    shutil.rmtree(bundle)
