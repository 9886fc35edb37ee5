"""Growing a trained network wider, deeper or further-sighted: the grown copy starts as the
same function and then learns."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from models.bundle import fold_batchnorm
from models.ds2 import DS2, SequenceBatchNorm
from tests.models.conftest import TINY_CONFIGS
from training.grow import widen


def trained_like(name: str) -> DS2:
    """A tiny DS2 with non-trivial BatchNorm statistics, row convolution and biases, as a
    trained network has them (fresh ones are too symmetric to catch a misplaced block)."""
    torch.manual_seed(3)
    model = DS2(TINY_CONFIGS[name])
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, SequenceBatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        model.row_conv.weight.uniform_(-0.5, 0.5)
        model.output.bias.uniform_(-0.5, 0.5)
        model.feat_mean.uniform_(-1, 1)
    return model


def inputs(bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(3, 37, bins, generator=torch.Generator().manual_seed(5))
    return x, torch.tensor([37, 20, 9])


def ctc_loss(model: DS2) -> torch.Tensor:
    """CTC loss of three fixed three-letter targets on `inputs`."""
    log_probs, n = model(*inputs(model.config.features.n_bins))
    targets = torch.tensor([[3, 4, 5], [6, 7, 8], [9, 10, 11]])
    return F.ctc_loss(log_probs.transpose(0, 1), targets, n, torch.full((3,), 3))


def sgd_steps(model: DS2, lr: float, steps: int = 2) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        ctc_loss(model).backward()
        opt.step()


def assert_same_function(before: DS2, after: DS2, train: bool) -> None:
    """The grown network's outputs and lengths equal the original's, in the given mode."""
    x, lengths = inputs(before.config.features.n_bins)
    before.train(train)
    after.train(train)
    with torch.no_grad():
        want, n_want = before(x, lengths)
        got, n_got = after(x, lengths)
    assert torch.equal(n_got, n_want)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["2d-gru", "1d-rnn"])
@pytest.mark.parametrize("train", [False, True])
def test_a_widened_network_computes_the_same_function(name: str, train: bool) -> None:
    small = trained_like(name)
    big = widen(small, small.config.rnn_hidden * 2 + 3)
    assert big.config == dataclasses.replace(
        small.config, rnn_hidden=small.config.rnn_hidden * 2 + 3
    )
    assert big.num_parameters() > small.num_parameters()
    assert_same_function(small, big, train)


def test_the_new_units_learn() -> None:
    """Every new weight gets a gradient within two steps, so the added width is not dead."""
    small = trained_like("2d-gru")
    big = widen(small, 24).train()
    old = small.config.rnn_hidden
    before = {k: v.clone() for k, v in big.state_dict().items()}
    sgd_steps(big, lr=0.1)
    after = big.state_dict()
    # weights out of the new units started at zero and moved
    assert (after["output.weight"][:, old:] - before["output.weight"][:, old:]).abs().max() > 0
    w = after["rnns.1.input_proj.weight"] - before["rnns.1.input_proj.weight"]
    assert w[:, old:].abs().max() > 0
    # weights into the new units moved too
    w = after["rnns.0.input_proj.weight"] - before["rnns.0.input_proj.weight"]
    assert w[old:24].abs().max() > 0


def test_widening_refuses_what_it_cannot_preserve() -> None:
    small = trained_like("2d-gru")
    with pytest.raises(ValueError, match="shrink"):
        widen(small, small.config.rnn_hidden - 1)
    with pytest.raises(ValueError, match="unfold"):
        widen(fold_batchnorm(small.eval()), 32)
