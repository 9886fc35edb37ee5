"""A probe, not a serving path: would int8 convolutions cut the step further? Each 1-D conv
runs as torch's dynamically quantized Linear over its unfolded windows (per-row weight
scales), timed against fp32, bf16 and `--dtype int8` (int8 GRU only) in steady-state
`streaming.step`s of 5 output frames at B = 1, 2, 4, 8 and one 96-frame step, one thread's CPU
time, twice. Usage (repository root): python loadtest/results/int8/conv_probe.py"""

from __future__ import annotations

import time
import warnings

import torch
from torch import Tensor, nn

from models import streaming as S
from models.bundle import load_bundle
from models.ds2 import DS2


def bench(model: DS2, batch: int, frames: int, calls: int = 300) -> float:
    """ms of CPU per step, the state carried from step to step as a live stream's is."""
    state = S.init_state(model, batch)
    x = torch.randn(batch, frames, model.config.features.n_bins) - 8
    with torch.no_grad():
        for _ in range(30):
            state = S.step(model, x, state)[1]
        start = time.process_time()
        for _ in range(calls):
            state = S.step(model, x, state)[1]
    return (time.process_time() - start) / calls * 1e3


class Int8Conv:
    """conv1d(x) as an int8 Linear over x's windows: [B, C, T] -> [B, O, T']."""

    def __init__(self, conv: nn.Conv1d) -> None:
        w = conv.weight.detach()
        linear = nn.Linear(w.shape[1] * w.shape[2], w.shape[0])
        linear.load_state_dict({"weight": w.reshape(w.shape[0], -1), "bias": conv.bias})
        qconfig = {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
        quantize = torch.ao.quantization.quantize_dynamic
        self.linear = quantize(nn.Sequential(linear), qconfig, dtype=torch.qint8)[0]
        self.kernel, self.stride = conv.kernel_size[0], conv.stride[0]

    def __call__(self, x: Tensor) -> Tensor:
        windows = x.unfold(2, self.kernel, self.stride)  # [B, C, T', k]
        b, c, t, k = windows.shape
        rows = windows.permute(0, 2, 1, 3).reshape(b, t, c * k)
        return self.linear(rows).transpose(1, 2)


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    models = {p: load_bundle("models/default", dtype=p) for p in ("fp32", "bf16", "int8")}
    convs = load_bundle("models/default", dtype="int8")
    for layer in convs.conv_stack:
        assert isinstance(layer.conv, nn.Conv1d)
        layer._convolve = Int8Conv(layer.conv)  # type: ignore[method-assign]
    models["int8 gru+conv"] = convs
    frames = 5 * convs.config.time_stride
    for _ in range(2):
        for name, model in models.items():
            small = [round(bench(model, b, frames), 2) for b in (1, 2, 4, 8)]
            print(name, small, "long T=96:", round(bench(model, 1, 96, 50), 2))


if __name__ == "__main__":
    main()
