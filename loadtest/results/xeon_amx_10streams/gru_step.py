"""One GRU layer's streaming step (B=1, 5 frames of 30 ms, 512 hidden) and its GEMMs on one
thread, fp32 and bf16, with oneDNN on and off: what a model step costs on this CPU at the
batch sizes a lightly loaded server makes. Usage: python gru_step.py"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def ms_per_call(f: Callable[[], object], n: int = 300) -> float:
    for _ in range(20):
        f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e3


def row(dt: torch.dtype, onednn: bool) -> str:
    w = torch.randn(1536, 512, dtype=dt)
    x1, x5 = torch.randn(1, 512, dtype=dt), torch.randn(5, 512, dtype=dt)
    h, xs = torch.zeros(1, 1, 512, dtype=dt), torch.randn(1, 5, 512, dtype=dt)
    params = [torch.randn(1536, 512, dtype=dt), torch.randn(1536, 512, dtype=dt)]
    params += [torch.zeros(1536, dtype=dt), torch.zeros(1536, dtype=dt)]
    with torch.backends.mkldnn.flags(enabled=onednn), torch.no_grad():
        one = ms_per_call(lambda: torch.nn.functional.linear(x1, w))
        five = ms_per_call(lambda: torch.nn.functional.linear(x5, w))
        gru = ms_per_call(lambda: torch._VF.gru(xs, h, params, True, 1, 0.0, False, False, True))
    return f"| {dt} | {onednn} | {one:.3f} | {five:.3f} | {gru:.3f} |"


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(
        "| dtype | oneDNN | linear 1x512x1536 ms | linear 5x512x1536 ms | GRU step, 5 frames, ms |"
    )
    print("| --- | --- | ---: | ---: | ---: |")
    for dt in (torch.float32, torch.bfloat16):
        for onednn in (True, False):
            print(row(dt, onednn))
