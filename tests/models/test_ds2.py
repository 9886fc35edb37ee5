"""The network's fused GRU paths (training, offline and streaming chunks) compute the same
recurrence as the step loop, forward and backward."""

import copy

import pytest
import torch

from models.config import ModelConfig
from models.ds2 import RecurrentLayer, SequenceBatchNorm


def test_fused_gru_scan_equals_step_loop() -> None:
    torch.manual_seed(0)
    layer = RecurrentLayer(ModelConfig(rnn_hidden=24), in_dim=10, folded=False).double()
    u = torch.randn(3, 17, 72, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(3, 24, dtype=torch.float64)
    keep = torch.ones(3, 17, dtype=torch.bool)  # an update mask forces the step loop
    out_loop, h_loop = layer.scan(u, h0, keep)
    eye, zero = torch.eye(72, dtype=torch.float64), torch.zeros(72, dtype=torch.float64)
    out_fused, h_fused = layer._gru_kernel(u, h0, eye, zero)  # gates fed as they are
    torch.testing.assert_close(out_fused, out_loop, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(h_fused, h_loop, rtol=1e-10, atol=1e-10)
    g_loop = torch.autograd.grad(out_loop.square().sum(), [u, layer.recurrent.weight])
    out_fused, _ = layer._gru_kernel(u, h0, eye, zero)
    g_fused = torch.autograd.grad(out_fused.square().sum(), [u, layer.recurrent.weight])
    for a, b in zip(g_fused, g_loop, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_training_run_with_bn_folded_into_the_kernel_equals_project_then_scan() -> None:
    """A layer's forward hands the fused kernel BN(W x) as input weights (batch statistics
    from x's covariance, padded steps left out); outputs, every gradient and BN's running statistics
    must be those of projecting, normalising and scanning step by step."""
    torch.manual_seed(1)
    a = RecurrentLayer(ModelConfig(rnn_hidden=16), in_dim=12, folded=False).train()
    b = copy.deepcopy(a)
    assert isinstance(a.bn, SequenceBatchNorm) and isinstance(b.bn, SequenceBatchNorm)
    with torch.no_grad():
        a.bn.weight.uniform_(0.5, 1.5)
        a.bn.bias.normal_()
        b.load_state_dict(a.state_dict())
    x = torch.rand(4, 23, 12) * 3  # clipped-ReLU-like: positive mean
    mask = torch.arange(23)[None] < torch.tensor([23, 17, 9, 2])[:, None]
    h0 = torch.zeros(4, 16)
    got = a(x, mask, h0)
    keep = torch.ones(4, 23, dtype=torch.bool)  # an update mask forces the step loop
    want, _ = b.scan(b.project(x, mask), h0, keep)
    torch.testing.assert_close(got[mask], want[mask], rtol=1e-5, atol=1e-5)
    got[mask].square().sum().backward()
    want[mask].square().sum().backward()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert pa.grad is not None and pb.grad is not None, name
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-4, atol=1e-4, msg=name)
    torch.testing.assert_close(a.bn.running_mean, b.bn.running_mean)
    torch.testing.assert_close(a.bn.running_var, b.bn.running_var)
    a.eval(), b.eval()  # and with the running statistics
    with torch.no_grad():
        want, _ = b.scan(b.project(x, mask), h0, keep)
        torch.testing.assert_close(a(x, mask, h0), want, rtol=1e-5, atol=1e-5)


def _runs(rng: torch.Generator, batch: int, t: int) -> torch.Tensor:
    """One run of real positions per row, anywhere in the chunk (or none), as streams that
    start, go on and end inside one step have."""
    mask = torch.zeros(batch, t, dtype=torch.bool)
    for b in range(batch):
        start = int(torch.randint(0, t + 1, (1,), generator=rng))
        end = int(torch.randint(start, t + 1, (1,), generator=rng))
        mask[b, start:end] = True
    mask[0] = True  # a stream in the middle of its utterance
    return mask


@pytest.mark.parametrize("folded", [True, False])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 0.05)])
def test_streaming_chunk_run_equals_step_loop_with_held_states(
    folded: bool, dtype: torch.dtype, tol: float
) -> None:
    rng = torch.Generator().manual_seed(3)
    layer = RecurrentLayer(ModelConfig(rnn_hidden=24), in_dim=10, folded=folded).eval()
    for _ in range(5):
        x = torch.randn(6, 9, 10, generator=rng).to(dtype)
        h0 = torch.randn(6, 24, generator=rng).to(dtype)
        update = _runs(rng, 6, 9)
        with torch.no_grad():
            want_out, want_h = layer.to(torch.float64).scan(
                layer.project(x.double(), None), h0.double(), update
            )
            out, h = layer.to(dtype).run(x, h0, update)
        torch.testing.assert_close(h.double(), want_h, atol=tol, rtol=0)
        real = update[:, :, None]
        torch.testing.assert_close((out.double() * real), want_out * real, atol=tol, rtol=0)


def test_streaming_chunk_run_takes_the_step_loop_for_gaps() -> None:
    """A hold between two real positions is not one run: the fused kernel cannot express it."""
    torch.manual_seed(0)
    layer = RecurrentLayer(ModelConfig(rnn_hidden=8), in_dim=5, folded=True).eval()
    x, h0 = torch.randn(2, 6, 5), torch.randn(2, 8)
    update = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    with torch.no_grad():
        want = layer.scan(layer.project(x, None), h0, update)
        got = layer.run(x, h0, update)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
