"""models/rows.py: one plan turns a stream into rows and merges them back, streamed or whole."""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
import torch

from models.config import FeatureConfig, WarpMerge
from models.rows import RowPlan, StreamRows, align_members, mix_members
from models.warp import warp_features

F32 = npt.NDArray[np.float32]
FEATURES = FeatureConfig()
V = 5


def _plan(factors: tuple[float, ...], merge: WarpMerge = "choose") -> RowPlan:
    warp = functools.partial(warp_features, features=FEATURES)
    return RowPlan(factors, merge, 4, warp)


def _network(seed: int, feats: torch.Tensor) -> F32:
    """A frame-local stand-in for a member's network: log-probs [T, V] of frames [T, F]."""
    w = torch.from_numpy(np.random.default_rng(seed).normal(0, 0.05, (FEATURES.n_bins, V)))
    return np.asarray(torch.log_softmax(feats.double() @ w, -1).float().numpy(), np.float32)


def test_an_ensemble_with_warps_merges_the_same_rows_streamed_as_whole() -> None:
    """Two members with warps (one choosing, one averaging; the second emits 3 frames late,
    as a longer look-ahead does): in chunks through `StreamRows` and `align_members` the
    stream gets what the whole utterance gets through `RowPlan`, frame for frame."""
    plans = [_plan((0.8, 1.0, 1.25)), _plan((0.9, 1.1), "mean")]
    weights, delay = [0.6, 0.4], [0, 3]
    rng = np.random.default_rng(0)
    feats = torch.from_numpy(rng.normal(-8, 3, (40, FEATURES.n_bins)).astype(np.float32))

    whole = []
    for m, plan in enumerate(plans):
        candidates = plan.expand(feats, range(plan.candidates))
        outs = [[_network(m, r) for r in cand] for cand in candidates]
        whole.append(plan.merge_rows(outs, plan.start()))
    expected = mix_members(whole, weights)

    streams = [StreamRows.start(plan, adapted=False) for plan in plans]
    late = [np.zeros((0, V), np.float32) for _ in plans]  # frames a member has yet to emit
    held: list[F32] | None = None
    got, decided = [], False
    for lo in range(0, 40, 8):
        last = lo + 8 >= 40
        emitted = []
        for m, stream in enumerate(streams):
            rows = stream.expand(feats[lo : lo + 8], None, None)
            merged, keep = stream.merge([_network(m, r) for r in rows])
            decided |= keep is not None
            # a member that looks further ahead emits the same frames later, all at the end
            late[m] = np.concatenate([late[m], merged])
            n = len(late[m]) if last else max(len(late[m]) - delay[m], 0)
            emitted.append(late[m][:n])
            late[m] = late[m][n:]
        ready, held = align_members(held, emitted)
        got.append(mix_members(ready, weights))
    assert decided  # the choosing member kept one warp mid-stream and ran one row after
    assert not any(len(r) for r in held or [])
    np.testing.assert_allclose(np.concatenate(got), expected, atol=1e-6)


def test_one_network_without_warps_is_one_row_and_the_identity() -> None:
    plan = _plan(())
    rows = StreamRows.start(plan, adapted=False)
    feats = torch.zeros(8, FEATURES.n_bins)
    (row,) = rows.expand(feats, None, None)
    assert row is feats  # no copy in
    out = np.zeros((4, V), np.float32)
    merged, keep = rows.merge([out])
    assert merged is out and keep is None  # nor out
    assert plan.identity(adapted=False, profiled=False) and plan.start() is None
