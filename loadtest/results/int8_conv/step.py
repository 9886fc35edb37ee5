"""A model step of each network of models/default in int8 with its 1-D convolutions run three
ways: oneDNN's convolution (as shipped), one fp32 matrix product over the unfolded windows, and
the int8 one of int8_conv.patch. Apply the patch first (`git apply`), one torch thread:
    .venv/bin/python loadtest/results/int8_conv/step.py"""
import time, torch
from torch import nn
from models.ensemble import load_networks
from models.streaming import step, init_state, stack_states
from models.quantize import Int8Conv  # with int8_conv.patch applied
torch.set_num_threads(1)
nets = load_networks("models/default", "cpu", "int8", True)
def t_step(m, n, t, reps):
    x = torch.randn(n, t, m.config.features.n_bins); s = stack_states([init_state(m, 1)] * n)
    with torch.inference_mode():
        _, s = step(m, torch.randn(n, 60, m.config.features.n_bins), s)
        for _ in range(10): step(m, x, s)
        t0 = time.perf_counter()
        for _ in range(reps): step(m, x, s)
    return (time.perf_counter() - t0) / reps * 1000
def gemm(conv):
    c = conv.conv; O, C, k = c.weight.shape
    lin = nn.Linear(C * k, O); lin.weight.data = c.weight.reshape(O, C * k).clone(); lin.bias.data = c.bias.clone()
    return Int8Conv(lin, k, conv.geom.stride)
for i, m in enumerate(nets.models):
    q = [c.int8 for c in m.conv_stack]; g = [gemm(c) for c in m.conv_stack]
    variants = {"mkldnn": [None] * len(q), "fp32 gemm": g, "int8": q}
    for n, t in [(2, 15), (4, 15), (8, 15), (8, 30)]:
        res = {k: [] for k in variants}
        for rnd in range(3):
            for k, v in variants.items():
                for c, x in zip(m.conv_stack, v): c.int8 = x
                res[k].append(t_step(m, n, t, 60))
        print(f"net{i} rows={n} frames={t}: " + "; ".join(f"{k} {sorted(v)[1]:.2f}" for k, v in res.items()) + " ms (median of 3)")
