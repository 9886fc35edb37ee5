"""The network's fused GRU path (used on CUDA) computes the same recurrence as the step loop
that streaming uses, forward and backward."""

import torch

from models.config import ModelConfig
from models.ds2 import RecurrentLayer


def test_fused_gru_scan_equals_step_loop() -> None:
    torch.manual_seed(0)
    layer = RecurrentLayer(ModelConfig(rnn_hidden=24), in_dim=10, folded=False).double()
    u = torch.randn(3, 17, 72, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(3, 24, dtype=torch.float64)
    keep = torch.ones(3, 17, dtype=torch.bool)  # an update mask forces the step loop
    out_loop, h_loop = layer.scan(u, h0, keep)
    out_fused, h_fused = layer._fused_scan(u, h0)
    torch.testing.assert_close(out_fused, out_loop, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(h_fused, h_loop, rtol=1e-10, atol=1e-10)
    g_loop = torch.autograd.grad(out_loop.square().sum(), [u, layer.recurrent.weight])
    out_fused, _ = layer._fused_scan(u, h0)
    g_fused = torch.autograd.grad(out_fused.square().sum(), [u, layer.recurrent.weight])
    for a, b in zip(g_fused, g_loop, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
