"""`--dtype int8`: the recurrent layers' matrices in int8, for serving on the CPU.

Why: a streaming server steps small batches (1-2 streams of five output frames at ten
streams), where a step's cost is reading the recurrent weights, not arithmetic. torch's
dynamically quantized GRU keeps them prepacked in int8 (a quarter of fp32's bytes) and runs
such a step about 3x cheaper than fp32 or bf16 on the CPUs measured
(`experiments/loadtest/xeon_amx_10streams/int8_step.md`). With one weight scale per output row
it reads both dev sets as fp32 does; one scale per matrix is too coarse for real speech,
whose rows differ in range (`int8_eval/` there). Activations are quantized per call (one scale
per input tensor), so a stream's numbers can differ slightly with the chunk and with the
streams batched beside it: close to fp32, not bit-equal to it.

Convolutions, row convolution and the output layer stay fp32: they are a small part of a
step, and int8 1-D convolutions (one scale per call for a batch's activations) save little of
a step and resolve real speech's small activations too coarsely
(`experiments/loadtest_int8_conv.md`). The step-by-step fallback (`RecurrentLayer.scan`, for
shapes the fused kernel cannot express) keeps the fp32 weights too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from models.ds2 import DS2, RecurrentLayer

# one int8 scale per output row of each weight matrix: one per matrix is too coarse for real
# speech (experiments/loadtest/xeon_amx_10streams/README.md; its probe that swapped this for the
# per-matrix qconfig is at commit f01ef29)
WEIGHT_QCONFIG = torch.ao.quantization.per_channel_dynamic_qconfig


@dataclass(frozen=True)
class Int8Gru:
    """One layer's int8 GRU: `(x [B, T, D], h [B, H]) -> (out [B, T, H], h_n [B, H])` in
    h's dtype, the contract of `RecurrentLayer._gru_kernel`. A plain object, not a module, so
    the model's state dict and `.to()` never see the prepacked weights."""

    gru: nn.Module

    def __call__(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        out, h_n = self.gru(x.float().contiguous(), h[None].float().contiguous())
        return out.to(h.dtype), h_n[0].to(h.dtype)


def quantize_recurrence(model: DS2) -> DS2:
    """Give every GRU layer of an eval-mode fp32 CPU model an int8 kernel, built from the
    weights inference uses (BatchNorm folded in). Returns the same model."""
    if model.training:
        raise ValueError("int8 is for inference: call eval() first")
    if model.config.rnn_type != "gru":
        raise ValueError(f"int8 needs GRU layers; this model's are {model.config.rnn_type!r}")
    weight = next(model.parameters())
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        raise ValueError(
            f"int8 runs on the CPU from fp32 weights, not {weight.device.type}/{weight.dtype}"
        )
    for layer in model.rnn_stack:
        layer.int8 = Int8Gru(_quantized_gru(layer))
    return model


def _quantized_gru(layer: RecurrentLayer) -> nn.Module:
    w, b, u, b_u = layer.inference_weights()
    gru = nn.GRU(w.shape[1], layer.hidden, batch_first=True)
    gru.load_state_dict({"weight_ih_l0": w, "weight_hh_l0": u, "bias_ih_l0": b, "bias_hh_l0": b_u})
    with warnings.catch_warnings():
        # torch 2.13 marks its eager quantization API deprecated (for torchao, which has no
        # fused quantized GRU); it is what this pinned torch runs. Revisit when torch moves.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            nn.Sequential(gru),
            {nn.GRU: WEIGHT_QCONFIG},
            dtype=torch.qint8,
        )
    return cast(nn.Module, quantized[0])
