"""How much accuracy int8 recurrent layers would cost (the lead in README.md here): `harken eval`
with every GRU layer's fused kernel swapped for torch's dynamically quantized int8 GRU built
from the same folded weights (BatchNorm folded with its running statistics, as inference
does). The convolutions and the output layer stay fp32. Offline only; a probe, not a serving
path. Usage (repository root): [INT8_WEIGHTS=channel] python PATH/int8_accuracy.py EVAL_ARGS..."""

from __future__ import annotations

import os
import sys
import warnings

import torch
from torch import Tensor

import harken_cli
from models.ds2 import RecurrentLayer

_QUANTIZED: dict[int, torch.nn.Module] = {}
# INT8_WEIGHTS=channel: one scale per output row of each weight matrix instead of one per matrix
QCONFIG = (
    torch.ao.quantization.per_channel_dynamic_qconfig
    if os.environ.get("INT8_WEIGHTS") == "channel"
    else torch.ao.quantization.default_dynamic_qconfig
)


def _int8_kernel(
    self: RecurrentLayer, x: Tensor, h: Tensor, w: Tensor, b: Tensor
) -> tuple[Tensor, Tensor]:
    """RecurrentLayer._gru_kernel's contract, computed by an int8 GRU (built on first call:
    in eval mode w and b are the same every call)."""
    if id(self) not in _QUANTIZED:
        gru = torch.nn.GRU(w.shape[1], w.shape[0] // 3, batch_first=True)
        weights = {"weight_ih_l0": w, "weight_hh_l0": self.recurrent.weight}
        weights |= {"bias_ih_l0": b, "bias_hh_l0": self.recurrent.bias}
        gru.load_state_dict({k: v.detach().float() for k, v in weights.items()})
        quantized = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(gru), {torch.nn.GRU: QCONFIG}, dtype=torch.qint8
        )
        _QUANTIZED[id(self)] = quantized[0]
    out, h_n = _QUANTIZED[id(self)](x.float().contiguous(), h[None].float().contiguous())
    return out.to(h.dtype), h_n[0].to(h.dtype)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    RecurrentLayer._gru_kernel = _int8_kernel  # type: ignore[method-assign]
    sys.exit(harken_cli.main(["eval", *sys.argv[1:]]))
