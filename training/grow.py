"""Growing a trained network wider without changing what it computes (Net2Net-style).

Why: the shipped network underfits its own training voices, and training a larger one from
scratch on two cores does not get past CTC's first plateau within a session's budget
(models/results/people.md). A wider copy whose new recurrent units start disconnected from
every old unit and from the output computes exactly the old function on the first step, and
training then decides what the new units are for. Only `rnn_hidden` grows: a GRU has no
identity setting, so a new layer cannot start as a no-op.

The row convolution's look-ahead can grow the same way (`lengthen`): its new taps on later
frames start at zero, so the longer network computes the old function and training decides
how much of the extra future it wants (DS2 §3.7: future context is what a unidirectional
network lacks). It costs the same in latency on partials, nothing on the final.
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


@torch.no_grad()
def lengthen(short: DS2, tau: int) -> DS2:
    """A copy of `short` whose row convolution sees `tau` future frames instead of its own
    tau, computing what `short` does: the new taps (on frames further ahead) are zero. Offline
    the output is unchanged; streaming, each frame comes `tau - old` frames later."""
    old = short.config.row_conv_tau
    if tau < old:
        raise ValueError(f"row_conv_tau can grow, not shrink ({old} -> {tau})")
    config = dataclasses.replace(short.config, row_conv_tau=tau)
    long = DS2(config, folded=short.folded).to(next(short.parameters()).device)
    state = short.state_dict()
    w = long.row_conv.weight
    w.zero_()
    w[:, :, : old + 1] = state.pop("row_conv.weight")
    state["row_conv.weight"] = w.clone()
    long.load_state_dict(state)
    return long


@torch.no_grad()
def deepen(shallow: DS2, layers: int, seed: int = 0, gain: float = 0.0) -> DS2:
    """A copy of `shallow` with `layers` recurrent layers, the new ones residual on top of the
    old (before the row convolution), with a fresh layer's random weights and every unit's
    gain `gain`. At zero the row convolution reads exactly the old top layer's outputs until
    training moves the gains; a small gain changes the function a little but lets the new
    weights learn from the first step. Folded or trainable, as `shallow` is."""
    old = shallow.config.rnn_layers
    if layers <= old:
        raise ValueError(f"rnn_layers can grow, not shrink or stay ({old} -> {layers})")
    config = dataclasses.replace(
        shallow.config,
        rnn_layers=layers,
        rnn_residual_layers=shallow.config.rnn_residual_layers + layers - old,
    )
    with torch.random.fork_rng(devices=[]):  # data-parallel replicas deepen identically
        torch.manual_seed(seed)
        deep = DS2(config, folded=shallow.folded).to(next(shallow.parameters()).device)
    state = deep.state_dict()
    state.update(shallow.state_dict())  # every old tensor keeps its name; new layers are extra
    deep.load_state_dict(state)
    for layer in deep.rnn_stack[old:]:
        assert layer.gain is not None  # the new layers are residual
        layer.gain.fill_(gain)
    return deep
