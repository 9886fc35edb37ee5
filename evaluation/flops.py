"""FLOPs of one stream's audio through the streaming model, counted from its `ModelConfig`,
and the same counted by torch as a cross-check.

Convention: a multiply-add is 2 FLOPs. BatchNorm is folded into the weights (as a bundle
stores the model), so it costs nothing of its own. Per output position (a stream emits
1000 / (hop_ms x time_stride) of them per second of audio) the model runs:

- matrix products (`evaluation.bench_model.chunk_flops`): the conv front end (2D over
  frequency and time, or 1D over time, its first layer striding in time), every recurrent
  layer's input projection W x and recurrent product U h (3 gates for a GRU), the row
  convolution (tau + 1 taps per unit) and the output layer. torch's FlopCounterMode counts
  exactly these (matmuls and convolutions, their bias adds not included), so the two agree
  to the FLOP.
- elementwise ops (`elementwise_flops`), counted as one FLOP per output element of each op,
  whatever the op (an add and a tanh alike): the input normalisation (subtract, divide per
  input frame), each conv layer's clipped ReLU and padding mask, per GRU unit the fused
  cell's two gate adds and sigmoids, the reset product, the candidate's add and tanh, the
  interpolation as a subtract, multiply and add, and the padding mask (11; 4 for a simple
  RNN, which steps position by position: add, clip, the pre-roll `where`, mask), a
  residual layer's gain product and add (2 per unit), and the log-softmax (one per output
  symbol). FlopCounterMode ignores all of these; torch's own tally of its pointwise ops
  (`counted_flops`) also sees the streaming bookkeeping on [B, T] masks and counters, which
  the estimate leaves out: ELEMENTWISE_ALLOWANCE bounds the gap. For the default model the
  elementwise ops are ~0.2% of the FLOPs: the floor is the matrix products.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from evaluation.bench_model import chunk_flops
from models import streaming
from models.config import ModelConfig
from models.ds2 import DS2

# |elementwise estimate - torch's pointwise tally| / the tally, at most: the tally's extra
# is the bookkeeping on masks and counters (under 2% for every test config, 0.06% for the
# default model)
ELEMENTWISE_ALLOWANCE = 0.03


def positions_per_second(config: ModelConfig) -> float:
    """Output positions one stream emits per second of audio."""
    return 1000 / (config.features.hop_ms * config.time_stride)


def elementwise_flops(config: ModelConfig) -> int:
    """Elementwise FLOPs of one output position of one stream (see the module docstring)."""
    f, s = config.features.n_bins, config.time_stride
    total = 2 * f * s  # normalisation of `s` input frames
    bins = f
    for i in range(config.conv_layers):
        if config.conv_type == "2d":
            kf = max(3, (config.conv_freq_kernel // 2**i) | 1)
            bins = (bins + 2 * ((kf - 1) // 2) - kf) // config.conv_freq_stride + 1
            total += 2 * config.conv_channels * bins  # clipped ReLU, mask
        else:
            total += 2 * config.conv_channels
    per_unit = 11 if config.rnn_type == "gru" else 4
    total += per_unit * config.rnn_hidden * config.rnn_layers
    total += 2 * config.rnn_hidden * config.rnn_residual_layers  # x + gain * GRU(x)
    return total + config.vocab_size  # log-softmax


def analytic_flops(config: ModelConfig, frames: int, batch: int = 1) -> dict[str, int]:
    """FLOPs of one steady-state `step` of `frames` input frames (a multiple of the time
    stride) for `batch` streams, per component; `elementwise` last."""
    out = chunk_flops(config, frames, batch)
    out["elementwise"] = elementwise_flops(config) * (frames // config.time_stride) * batch
    return out


def flops_per_audio_second(config: ModelConfig) -> dict[str, float]:
    """FLOPs per second of one stream's audio, per component (see `analytic_flops`)."""
    per_position = analytic_flops(config, config.time_stride, 1)
    return {k: v * positions_per_second(config) for k, v in per_position.items()}


# torch leaves TorchDispatchMode's __init__ and __init_subclass__ unannotated
class _PointwiseTally(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Output elements of every pointwise aten op (and of log-softmax) run inside it."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.elements = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func.overloadpacket is torch.ops.aten.gru:  # the fused recurrence: count its cells
            with self:
                decomposed = func.decompose(*args, **(kwargs or {}))
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **(kwargs or {}))
        softmax = func.overloadpacket in (torch.ops.aten.log_softmax, torch.ops.aten._log_softmax)
        if torch.Tag.pointwise in func.tags or softmax:
            self.elements += sum(t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


def counted_flops(model: DS2, frames: int, batch: int = 1) -> tuple[int, int]:
    """torch's count of one steady-state `step` (past the pre-roll, so every position runs
    the recurrence): (FlopCounterMode's FLOPs, output elements of pointwise ops)."""
    n_bins = model.config.features.n_bins
    p = next(model.parameters())
    gen = torch.Generator().manual_seed(frames * 31 + batch)
    state = streaming.init_state(model, batch)
    pre_roll = -streaming.plan(model).row_first * model.config.time_stride
    warm = torch.randn(batch, pre_roll + model.config.time_stride, n_bins, generator=gen)
    warm = warm[:, : warm.shape[1] // model.config.time_stride * model.config.time_stride]
    with torch.inference_mode():
        _, state = streaming.step(model, warm.to(p.device), state)
        feats = torch.randn(batch, frames, n_bins, generator=gen).to(p.device)
        tally = _PointwiseTally()
        with FlopCounterMode(display=False) as counter, tally:
            streaming.step(model, feats, state)
    return int(counter.get_total_flops()), tally.elements
