"""A lead for the small-step cost (README.md here): torch's dynamically quantized int8 GRU and
Linear (fbgemm, weights prepacked once) against fp32 and bf16 at the shapes of one stream's
160 ms step (5 frames, 512 hidden), one thread. Only the kernels: the model's accuracy with
int8 recurrent layers is `int8_accuracy.py`'s. Usage (repository root): python loadtest/results/xeon_amx_10streams/int8_step.py"""

from __future__ import annotations

import warnings
from functools import partial

import torch

from loadtest.results.xeon_amx_10streams.gru_step import ms_per_call

if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    quantize = torch.ao.quantization.quantize_dynamic
    print("| B | product | fp32 ms | bf16 ms | int8 ms | int8, per-row weight scales, ms |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for b in (1, 8):
        lin, gru = torch.nn.Linear(512, 1536), torch.nn.GRU(512, 512, batch_first=True)
        q_lin = quantize(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)[0]
        q_gru = quantize(torch.nn.Sequential(gru), {torch.nn.GRU}, dtype=torch.qint8)[0]
        channel = {torch.nn.GRU: torch.ao.quantization.per_channel_dynamic_qconfig}
        q_gru_ch = quantize(torch.nn.Sequential(gru), channel, dtype=torch.qint8)[0]
        x1, x5, h = torch.randn(b, 512), torch.randn(b, 5, 512), torch.zeros(1, b, 512)
        with torch.no_grad():
            rows = {
                "linear 512 -> 1536, one frame": (lin, q_lin, None, (x1,)),
                "GRU layer, 5 frames": (gru, q_gru, q_gru_ch, (x5, h)),
            }
            for name, (fp32, int8, int8_ch, args) in rows.items():
                t32 = ms_per_call(partial(fp32, *args))
                t8 = ms_per_call(partial(int8, *args))
                t8c = f"{ms_per_call(partial(int8_ch, *args)):.3f}" if int8_ch else "-"
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    t16 = ms_per_call(partial(fp32, *args))
                print(f"| {b} | {name} | {t32:.3f} | {t16:.3f} | {t8:.3f} | {t8c} |")
