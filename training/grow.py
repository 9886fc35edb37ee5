"""Growing a trained network wider without changing what it computes (Net2Net-style).

Why: the shipped network underfits its own training voices, and training a larger one from
scratch on two cores does not get past CTC's first plateau within a session's budget
(experiments/people.md). A wider copy whose new recurrent units start disconnected from
every old unit and from the output computes exactly the old function on the first step, and
training then decides what the new units are for. Only `rnn_hidden` grows: a GRU has no
identity setting, so a new layer cannot start as a no-op.

Lengthening the row convolution and deepening with residual layers were tried and not
adopted (experiments/rowconv.md, deep.md); their code is at commit 13cc3b3.
"""

from __future__ import annotations

import dataclasses

import torch

from models.ds2 import DS2, SequenceBatchNorm


def _gate_rows(gates: int, old: int, new: int) -> torch.Tensor:
    """Row indices, in a `gates * new` wide layout, of the old units of every gate block."""
    return torch.cat([torch.arange(g * new, g * new + old) for g in range(gates)])


@torch.no_grad()
def widen(small: DS2, hidden: int, seed: int = 0) -> DS2:
    """A trainable (unfolded) copy of the trainable `small` with `hidden` recurrent units per
    layer that computes what `small` does. New units get a fresh layer's random weights into
    them and zero weights out of them (into the next layer, the old units' recurrences and the
    output), and their BatchNorm channels start as a fresh layer's. So the old units see exactly their old inputs, in training mode too (zero columns
    add nothing to the batch statistics of the next projection), while the new units already
    fire with distinct values, and the zero weights out of them get gradients from step one.
    """
    if small.folded:
        raise ValueError("widen a trainable model: unfold the bundle's BatchNorm first")
    old, new = small.config.rnn_hidden, hidden
    if new < old:
        raise ValueError(f"rnn_hidden can grow, not shrink ({old} -> {new})")
    config = dataclasses.replace(small.config, rnn_hidden=new)
    with torch.random.fork_rng(devices=[]):  # data-parallel replicas widen identically
        torch.manual_seed(seed)
        big = DS2(config, folded=False).to(next(small.parameters()).device)
    dst, src = big.state_dict(), small.state_dict()
    for k, v in src.items():  # the conv front end, its BatchNorm, the feature statistics
        if dst[k].shape == v.shape and not k.startswith(("rnns.", "row_conv.", "output.")):
            dst[k].copy_(v)
    gates = 3 if config.rnn_type == "gru" else 1
    rows = _gate_rows(gates, old, new)
    for a, b in zip(small.rnn_stack, big.rnn_stack, strict=True):
        in_old = a.input_proj.weight.shape[1]
        w = b.input_proj.weight
        w[rows] = 0.0  # old units: nothing from the previous layer's new units ...
        w[rows, :in_old] = a.input_proj.weight  # ... and their old input weights
        u = b.recurrent.weight
        u[rows] = 0.0
        u[rows, :old] = a.recurrent.weight  # old units ignore the new ones' state
        b.recurrent.bias[rows] = a.recurrent.bias
        assert isinstance(a.bn, SequenceBatchNorm) and isinstance(b.bn, SequenceBatchNorm)
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(b.bn, name)[rows] = getattr(a.bn, name)
    big.row_conv.weight[:old] = small.row_conv.weight  # new units: identity, as fresh
    big.output.weight.zero_()
    big.output.weight[:, :old] = small.output.weight
    big.output.bias.copy_(small.output.bias)
    return big
