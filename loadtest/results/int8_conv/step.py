"""A model step of each network of models/default in int8 (`--dtype int8`), its 1-D
convolutions run three ways: oneDNN's convolution (as shipped), one fp32 matrix product over
the unfolded input windows, and that product in int8 (one scale per output row of the weights,
as `int8_conv.patch` runs it). One torch thread, states past the pre-roll, median of 3:
    .venv/bin/python loadtest/results/int8_conv/step.py"""

from __future__ import annotations

import time
import warnings

import torch
from torch import Tensor, nn

from models.ds2 import DS2
from models.ensemble import load_networks
from models.quantize import WEIGHT_QCONFIG
from models.streaming import StreamState, init_state, stack_states, step

SHAPES = [(2, 15), (4, 15), (8, 15), (8, 30)]  # (rows, input frames) of live steps


class WindowProduct(nn.Module):
    """A Conv1d as a Linear over its unfolded windows ([B, C, T] -> [B, O, T'])."""

    def __init__(self, linear: nn.Module, kernel: int, stride: int) -> None:
        super().__init__()
        self.linear, self.kernel, self.stride = linear, kernel, stride

    def forward(self, x: Tensor) -> Tensor:
        b, c, _ = x.shape
        windows = x.unfold(2, self.kernel, self.stride)  # [B, C, T', k]
        flat = windows.transpose(1, 2).reshape(b, windows.shape[2], c * self.kernel)
        out: Tensor = self.linear(flat)
        return out.transpose(1, 2)


def window_product(conv: nn.Conv1d, int8: bool) -> WindowProduct:
    out_ch, in_ch, kernel = conv.weight.shape
    linear = nn.Linear(in_ch * kernel, out_ch)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.reshape(out_ch, in_ch * kernel))
        linear.bias.copy_(conv.bias if conv.bias is not None else torch.zeros(out_ch))
    if int8:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            linear = torch.ao.quantization.quantize_dynamic(
                nn.Sequential(linear), {nn.Linear: WEIGHT_QCONFIG}, dtype=torch.qint8
            )[0]
    return WindowProduct(linear, kernel, conv.stride[0])


def step_ms(model: DS2, rows: int, frames: int, reps: int = 60) -> float:
    n_bins = model.config.features.n_bins
    x = torch.randn(rows, frames, n_bins)
    state: StreamState = stack_states([init_state(model, 1)] * rows)
    with torch.inference_mode():
        _, state = step(model, torch.randn(rows, 60, n_bins), state)  # past the pre-roll
        for _ in range(10):
            step(model, x, state)
        start = time.perf_counter()
        for _ in range(reps):
            step(model, x, state)
    return (time.perf_counter() - start) / reps * 1000


def main() -> None:
    torch.set_num_threads(1)
    networks = load_networks("models/default", "cpu", "int8", True)
    for i, model in enumerate(networks.models):
        shipped = [layer.conv for layer in model.conv_stack]
        conv1d = [c for c in shipped if isinstance(c, nn.Conv1d)]
        variants: dict[str, list[nn.Module]] = {
            "oneDNN conv": shipped,
            "fp32 product": [window_product(c, False) for c in conv1d],
            "int8 product": [window_product(c, True) for c in conv1d],
        }
        for rows, frames in SHAPES:
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(3):
                for name, convs in variants.items():
                    for layer, conv in zip(model.conv_stack, convs, strict=True):
                        layer.conv = conv
                    times[name].append(step_ms(model, rows, frames))
            row = "; ".join(f"{name} {sorted(t)[1]:.2f}" for name, t in times.items())
            print(f"net{i} rows={rows} frames={frames}: {row} ms (median of 3)")


if __name__ == "__main__":
    main()
