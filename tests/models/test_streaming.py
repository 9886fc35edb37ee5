"""Streaming equals offline: any chunking, any batch mix, any precision within tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import streaming as S
from models.bundle import DTYPES
from models.ds2 import DS2
from models.quantize import quantize_recurrence
from tests.models.conftest import TINY_CONFIGS, randomize


@torch.no_grad()
def offline(model: DS2, feats: torch.Tensor) -> torch.Tensor:
    out, n = model(feats[None], torch.tensor([feats.shape[0]]))
    return out[0, : int(n[0])]


def simulate_dispatch(
    model: DS2, utts: list[torch.Tensor], seed: int, frames_multiple: int = 1
) -> list[torch.Tensor]:
    """Streams that start at random times and are grouped at random into batches, each batch
    with one chunk size (as the server does); then flushed together with ragged tails, at
    one of the lengths `flush_lengths` promises a server's warm-up."""
    rng = np.random.default_rng(seed)
    s = model.config.time_stride
    states = [S.init_state(model, 1) for _ in utts]
    pos = [0] * len(utts)
    outs: list[list[torch.Tensor]] = [[] for _ in utts]
    while True:
        ready = [i for i, u in enumerate(utts) if u.shape[0] - pos[i] >= s]
        if not ready:
            break
        chunk = s * int(rng.integers(1, 6))
        group = [i for i in ready if rng.random() < 0.7 and utts[i].shape[0] - pos[i] >= chunk]
        if not group:
            group, chunk = [ready[0]], s
        feats = torch.stack([utts[i][pos[i] : pos[i] + chunk] for i in group])
        lp, st = S.step(model, feats, S.stack_states([states[i] for i in group]))
        for j, (i, one) in enumerate(zip(group, S.unstack_states(st), strict=True)):
            states[i], pos[i] = one, pos[i] + chunk
            outs[i].append(lp[j][one.valid[0]])
    tails = [u[p:] for u, p in zip(utts, pos, strict=True)]
    t = max(x.shape[0] for x in tails)
    tail = torch.stack([torch.nn.functional.pad(x, (0, 0, 0, t - x.shape[0])) for x in tails])
    lengths = torch.tensor([x.shape[0] for x in tails])
    lp, st = S.flush(model, S.stack_states(states), tail, lengths, frames_multiple)
    assert lp.shape[1] * s in S.flush_lengths(model, t, frames_multiple)
    for i, rows in enumerate(S.split_valid(lp, st)):
        outs[i].append(rows)
    return [torch.cat(o) for o in outs]


@pytest.mark.parametrize("frames_multiple", [1, 16])
@pytest.mark.parametrize("seed", range(4))
def test_streaming_equals_forward_for_random_batches(
    tiny_model: DS2, seed: int, frames_multiple: int
) -> None:
    rng = np.random.default_rng(seed)
    batch = int(rng.integers(1, 9))
    f = tiny_model.config.features.n_bins
    utts = [torch.randn(int(rng.integers(0, 60)), f) * 2 for _ in range(batch)]
    got_all = simulate_dispatch(tiny_model, utts, seed, frames_multiple)
    for got, u in zip(got_all, utts, strict=True):
        ref = offline(tiny_model, u)
        assert got.shape == ref.shape
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=0)


def test_one_frame_at_a_time_and_whole_utterance(tiny_model: DS2) -> None:
    s = tiny_model.config.time_stride
    u = torch.randn(8 * s + 1, tiny_model.config.features.n_bins)
    ref = offline(tiny_model, u)
    st, rows = S.init_state(tiny_model, 1), []
    for i in range(0, 8 * s, s):
        lp, st = S.step(tiny_model, u[None, i : i + s], st)
        rows += S.split_valid(lp, st)
    lp, st = S.flush(tiny_model, st, u[None, 8 * s :])
    torch.testing.assert_close(torch.cat(rows + S.split_valid(lp, st)), ref, atol=1e-4, rtol=0)
    lp, st = S.flush(tiny_model, S.init_state(tiny_model, 1), u[None])
    torch.testing.assert_close(torch.cat(S.split_valid(lp, st)), ref, atol=1e-4, rtol=0)


def test_padded_batch_forward_equals_single_forward(tiny_model: DS2) -> None:
    utts = [torch.randn(n, tiny_model.config.features.n_bins) for n in (31, 7, 18)]
    T = max(u.shape[0] for u in utts)
    x = torch.stack([torch.nn.functional.pad(u, (0, 0, 0, T - u.shape[0])) for u in utts])
    out, n = tiny_model(x, torch.tensor([u.shape[0] for u in utts]))
    for b, u in enumerate(utts):
        torch.testing.assert_close(out[b, : int(n[b])], offline(tiny_model, u), atol=1e-4, rtol=0)


# Tolerances of max |log p| error against an fp64 reference, on a model whose outputs are
# confident (sharpened output layer); measured ~2e-3 (bf16), ~3e-4 (fp16) and 0.02-0.05 (int8,
# whose activations are quantized per call, so also per chunk and per batch) here.
TOLERANCE = {"bf16": 0.15, "fp16": 0.03, "int8": 0.15}


@pytest.mark.parametrize("precision", sorted(TOLERANCE))
def test_reduced_precision_streaming_close_to_fp64(precision: str) -> None:
    """Streams batched together and chunked at random read as one fp64 pass over each."""
    torch.manual_seed(1)
    model = randomize(DS2(TINY_CONFIGS["2d-gru"]))
    with torch.no_grad():
        model.output.weight.mul_(8)  # confident outputs, as a trained model has
    utts = [torch.randn(n, 161) * 2 for n in (50, 23, 41)]
    refs = [offline(model.double(), u.double()) for u in utts]
    low = randomize(DS2(TINY_CONFIGS["2d-gru"]))
    low.load_state_dict(model.float().state_dict())
    if precision == "int8":
        low = quantize_recurrence(low.eval())
    else:
        low = low.to(DTYPES[precision]).eval()
    for got, ref in zip(simulate_dispatch(low, utts, seed=0), refs, strict=True):
        assert got.shape == ref.shape
        assert float((got.double() - ref).abs().max()) < TOLERANCE[precision]


def test_step_rejects_bad_input(tiny_model: DS2) -> None:
    st = S.init_state(tiny_model, 2)
    s, f = tiny_model.config.time_stride, tiny_model.config.features.n_bins
    with pytest.raises(ValueError, match="bins"):
        S.step(tiny_model, torch.zeros(2, s, f + 1), st)
    with pytest.raises(ValueError, match="B=2"):
        S.step(tiny_model, torch.zeros(3, s, f), st)
    if s > 1:
        with pytest.raises(ValueError, match="multiple"):
            S.step(tiny_model, torch.zeros(2, s + 1, f), st)
    tiny_model.train()
    with pytest.raises(RuntimeError, match="eval"):
        S.step(tiny_model, torch.zeros(2, s, f), st)
