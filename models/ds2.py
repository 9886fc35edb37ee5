"""The Deep Speech 2 network: conv front end, sequence-wise BatchNorm, unidirectional
recurrent layers, row convolution and the output layer (DS2 §3.1-3.7).

Every layer is written as "pad, then compute on a window", and the streaming code in
`models/streaming.py` calls the very same `compute` methods on its own buffers, so a chunked
run and `forward` on the whole utterance are the same arithmetic. Padding frames beyond an
utterance's length are zeroed after every layer, exactly as a lone utterance would see them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F
from torch import Tensor, nn

from models.config import ModelConfig


def clipped_relu(x: Tensor, clip: float) -> Tensor:
    """min(max(x, 0), clip): DS2's activation, bounded so fp16 never overflows."""
    return torch.clamp(x, 0.0, clip)


def time_mask(lengths: Tensor, t: int) -> Tensor:
    """[B, t] bool: True where the frame index is below the utterance length."""
    return torch.arange(t, device=lengths.device)[None, :] < lengths[:, None]


class SequenceBatchNorm(nn.Module):
    """Sequence-wise BatchNorm (DS2 §3.2) over `dim` features, statistics over batch and
    the valid time steps only, so padding never skews them. Inference uses running averages.
    """

    running_mean: Tensor
    running_var: Tensor

    def __init__(self, features: int, momentum: float = 0.05, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))

    def scale_shift(self) -> tuple[Tensor, Tensor]:
        """The inference affine map y = x * scale + shift (used for folding)."""
        scale = self.weight / torch.sqrt(self.running_var + self.eps)
        return scale, self.bias - self.running_mean * scale

    def forward(self, x: Tensor, mask: Tensor | None, channel_dim: int) -> Tensor:
        """x has features on `channel_dim`: 1 for conv maps ([B, C, F, T] or [B, C, T], time
        last), 2 for sequences [B, T, C]. mask [B, T] marks the valid steps."""
        shape = [1] * x.dim()
        shape[channel_dim] = -1
        if not self.training:
            scale, shift = self.scale_shift()
            return x * scale.view(shape).to(x.dtype) + shift.view(shape).to(x.dtype)
        xf = x.float()
        ones = torch.ones(x.shape[0], x.shape[-1 if channel_dim == 1 else 1], device=x.device)
        m = expand_mask(ones if mask is None else mask, xf, time_last=channel_dim == 1)
        m = m.expand_as(xf)
        dims = [d for d in range(x.dim()) if d != channel_dim]
        stats = torch.stack([m.sum(dim=dims), (xf * m).sum(dim=dims), (xf * xf * m).sum(dim=dims)])
        stats = _all_reduce(stats)  # data-parallel: statistics of the global batch
        count = stats[0].clamp_min(1.0)
        mean = stats[1] / count
        var = (stats[2] / count - mean * mean).clamp_min(0.0)
        with torch.no_grad():
            self.running_mean.lerp_(mean.detach(), self.momentum)
            self.running_var.lerp_(var.detach(), self.momentum)
        y = (xf - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return (y * self.weight.view(shape) + self.bias.view(shape)).to(x.dtype)

    def fold_into(self, weight: Tensor, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """BN(x @ weight.T) over sequences x [B, T, D] as one affine map: (w [C, D], b [C]) with
        x @ w.T + b equal to this layer's output (batch statistics while training, updating the
        running ones as `forward` does; the running ones otherwise).

        Why: a fused GRU kernel takes its input weights as a parameter; handing it these lets it
        do the projection itself, where feeding it BN(W x) needs an identity matmul of the
        3H-wide gates (2.5x the projection's work at H = 512). The statistics of W x come from
        the mean and covariance of x ([D, D]), which cost less than W x itself."""
        if not self.training:
            scale, shift = self.scale_shift()
            return weight * scale[:, None], shift
        with torch.autocast(x.device.type, enabled=False):  # statistics in fp32, not bf16
            xf = x.to(torch.promote_types(x.dtype, torch.float32))
            ones = torch.ones(xf.shape[:2], device=x.device)
            m = (ones if mask is None else mask).to(xf.dtype)[:, :, None]
            xm = (xf * m).flatten(0, 1)
            d = xf.shape[-1]
            stats = torch.cat([m.sum()[None], xm.sum(0), (xm.T @ xf.flatten(0, 1)).flatten()])
            stats = _all_reduce(stats)  # data-parallel: statistics of the global batch
            count = stats[0].clamp_min(1.0)
            mean_x = (stats[1 : 1 + d] / count).double()
            cov = (stats[1 + d :].view(d, d) / count).double() - torch.outer(mean_x, mean_x)
            w64 = weight.double()
            mean = (w64 @ mean_x).to(self.running_mean.dtype)
            var = ((w64 @ cov) * w64).sum(1).clamp_min(0.0).to(self.running_mean.dtype)
        with torch.no_grad():
            self.running_mean.lerp_(mean.detach(), self.momentum)
            self.running_var.lerp_(var.detach(), self.momentum)
        scale = self.weight / torch.sqrt(var + self.eps)
        return weight * scale[:, None], self.bias - mean * scale


def _all_reduce(stats: Tensor) -> Tensor:
    """Sum over data-parallel replicas (differentiably), so every replica normalises with the
    statistics of the whole synchronous batch, as one process on that batch would."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return cast(Tensor, dist_nn.all_reduce(stats))  # type: ignore[no-untyped-call]
    return stats


def expand_mask(mask: Tensor, x: Tensor, time_last: bool) -> Tensor:
    """A [B, T] mask shaped to broadcast against x: time last ([B, C, F, T], [B, C, T]) or
    time second ([B, T, C])."""
    m = mask.to(x.dtype)
    if not time_last:
        return m[:, :, None]
    return m[:, None, None, :] if x.dim() == 4 else m[:, None, :]


@dataclass(frozen=True)
class ConvGeometry:
    """Time geometry of one conv layer, shared by `forward` and the streaming buffers."""

    kernel: int  # time kernel
    stride: int  # time stride
    pad: int  # zeros padded on each side in time by `forward`


class ConvLayer(nn.Module):
    """One conv layer: conv (2D over frequency x time, or 1D over time) -> BN -> clipped ReLU."""

    def __init__(self, cfg: ModelConfig, index: int, in_ch: int, folded: bool) -> None:
        super().__init__()
        k = cfg.conv_time_kernel
        self.geom = ConvGeometry(k, cfg.time_stride if index == 0 else 1, (k - 1) // 2)
        self.is2d, self.clip = cfg.conv_type == "2d", cfg.clip
        if self.is2d:
            kf = max(3, (cfg.conv_freq_kernel // 2**index) | 1)
            self.fpad = (kf - 1) // 2
            self.conv: nn.Module = nn.Conv2d(
                in_ch,
                cfg.conv_channels,
                (kf, k),
                (cfg.conv_freq_stride, self.geom.stride),
                padding=(self.fpad, 0),
                bias=folded,
            )
        else:
            self.conv = nn.Conv1d(in_ch, cfg.conv_channels, k, self.geom.stride, bias=folded)
        self.bn: nn.Module = nn.Identity() if folded else SequenceBatchNorm(cfg.conv_channels)

    def compute(self, x: Tensor, out_mask: Tensor | None) -> Tensor:
        """Convolve an already time-padded map ([B, C, F, T] or [B, C, T]); zero invalid steps."""
        y: Tensor = self._convolve(x)
        if isinstance(self.bn, SequenceBatchNorm):
            y = self.bn(y, out_mask, channel_dim=1)
        y = clipped_relu(y, self.clip)
        return y if out_mask is None else y * expand_mask(out_mask, y, time_last=True)

    def _convolve(self, x: Tensor) -> Tensor:
        """The convolution, widened to two output steps where a strided 2-D one would make a
        single step in bf16 on the CPU, then cut back.

        Why: on an Intel Xeon with AMX (family 6 model 207, torch 2.13) that case comes out
        wrong, different from call to call and sometimes NaN (oneDNN's kernel; 1-D and wider
        outputs are exact), and a stream stepped one output frame at a time hits it at every
        step. The extra zero columns on the right change no earlier output."""
        s = self.geom.stride
        one_step = 0 <= x.shape[-1] - self.geom.kernel < s
        if not (self.is2d and s > 1 and one_step and x.dtype == torch.bfloat16 and not x.is_cuda):
            return self.conv(x)  # type: ignore[no-any-return]
        wide = torch.nn.functional.pad(x, (0, s))
        return self.conv(wide)[..., :1]  # type: ignore[no-any-return]

    def out_features(self, in_bins: int) -> int:
        """Frequency bins after this layer (2D only)."""
        conv = self.conv
        assert isinstance(conv, nn.Conv2d)
        kf, sf = conv.kernel_size[0], conv.stride[0]
        return int((in_bins + 2 * self.fpad - kf) // sf + 1)


class RecurrentLayer(nn.Module):
    """A unidirectional GRU or simple RNN whose input projection W x is batch-normalised
    (DS2 §3.2). The projection is one matmul over all steps; only U h runs step by step.
    GRU: r, z = sigmoid(Wx + Uh + b); n = tanh(Wx_n + r * (U_n h + b_n)); h = (1 - z) n + z h.
    A residual layer outputs x + gain * h (`residual`): its state is still h alone.
    """

    def __init__(self, cfg: ModelConfig, in_dim: int, folded: bool, residual: bool = False) -> None:
        super().__init__()
        self.gru, self.hidden, self.clip = cfg.rnn_type == "gru", cfg.rnn_hidden, cfg.clip
        # ReZero's per-unit gain on a residual layer's own output; zero: the input passes
        self.gain = nn.Parameter(torch.zeros(cfg.rnn_hidden)) if residual else None
        gates = 3 if self.gru else 1
        self.input_proj = nn.Linear(in_dim, gates * cfg.rnn_hidden, bias=folded)
        self.bn: nn.Module = nn.Identity() if folded else SequenceBatchNorm(gates * cfg.rnn_hidden)
        self.recurrent = nn.Linear(cfg.rnn_hidden, gates * cfg.rnn_hidden, bias=True)
        # an int8 stand-in for the fused kernel, (x, h) -> (out, h_n): models/quantize.py
        self.int8: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None

    def project(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """[B, T, D] -> BN(W x) [B, T, G*H]."""
        u: Tensor = self.input_proj(x)
        if isinstance(self.bn, SequenceBatchNorm):
            u = self.bn(u, mask, channel_dim=2)
        return u

    def scan(self, u: Tensor, h: Tensor, update: Tensor | None) -> tuple[Tensor, Tensor]:
        """Run the recurrence over u [B, T, G*H] from h [B, H]. Where `update` [B, T] is
        False the state is held (streaming pre-roll). Returns outputs [B, T, H] and last h.
        Whole sequences take `forward`, whose fused kernel does the projection too."""
        outs = []
        for t in range(u.shape[1]):
            h_new = self._cell(u[:, t], h)
            h = h_new if update is None else torch.where(update[:, t, None], h_new, h)
            outs.append(h)
        out = torch.stack(outs, 1) if outs else u.new_zeros(u.shape[0], 0, self.hidden)
        return out, h

    def forward(self, x: Tensor, mask: Tensor | None, h: Tensor) -> Tensor:
        """Whole sequences: x [B, T, D] -> outputs [B, T, H] from h [B, H]; `scan(project(x))`,
        through one fused kernel that does the projection too where it can."""
        if not (self.gru and self._fusable(h) and x.shape[1] > 0):
            return self._residual(x, self.scan(self.project(x, mask), h, None)[0])
        return self._residual(x, self._gru_kernel(x, h, *self._input_weights(x, mask))[0])

    def _residual(self, x: Tensor, out: Tensor) -> Tensor:
        """What the layer hands on: its outputs, or a residual layer's input plus them scaled."""
        if self.gain is None:
            return out
        return x.to(out.dtype) + self.gain.to(out.dtype) * out

    def run(self, x: Tensor, h: Tensor, update: Tensor) -> tuple[Tensor, Tensor]:
        """Inference over a chunk: x [B, T, D] from h [B, H], where each row of `update`
        [B, T] is one run of True (a stream's real positions; its state is held before and
        after). Returns outputs [B, T, H] (arbitrary where `update` is False) and the state
        after each row's last real position.

        Why: a streaming server steps many short chunks; one fused kernel call per layer,
        instead of a dozen small ops per position, cuts the Python that runs under the
        interpreter lock, which the server's event loop shares (`scan` is the fallback)."""
        if self.training:
            raise RuntimeError("RecurrentLayer.run is for inference: call eval() first")
        if not (self.gru and self._fusable(h) and x.shape[1] > 0):
            out, h_last = self.scan(self.project(x, None), h, update)
            return self._residual(x, out), h_last
        B, T = update.shape
        count = update.sum(dim=1)
        start = torch.where(count > 0, update.to(torch.int8).argmax(dim=1), 0)
        last = T - 1 - update.flip(1).to(torch.int8).argmax(dim=1)
        shifted, runs = torch.stack(
            [(start > 0).any(), ((last - start + 1 == count) | (count == 0)).all()]
        ).tolist()
        if not runs:  # not one run per row
            out, h_last = self.scan(self.project(x, None), h, update)
            return self._residual(x, out), h_last
        given = x
        steps = torch.arange(T, device=x.device)[None, :]
        if shifted:  # every row's first real position to position 0: the kernel starts at h
            ahead = (steps + start[:, None]).clamp_max(T - 1)
            x = x.gather(1, ahead[:, :, None].expand(-1, -1, x.shape[2]))
        out, _ = self._gru_kernel(x, h, *self._input_weights(x, None))
        rows = torch.arange(B, device=x.device)
        h_last = torch.where((count > 0)[:, None], out[rows, (count - 1).clamp_min(0)], h)
        if shifted:
            back = (steps - start[:, None]).clamp_min(0)
            out = out.gather(1, back[:, :, None].expand(-1, -1, out.shape[2]))
        return self._residual(given, out), h_last

    def _input_weights(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """The fused kernel's input weights and bias: BN(W x) folded into W where the layer
        has BatchNorm (batch statistics while training), W and its bias otherwise."""
        w = self.input_proj.weight
        if isinstance(self.bn, SequenceBatchNorm):
            return self.bn.fold_into(w, x, mask)
        b = self.input_proj.bias
        return w, b if b is not None else w.new_zeros(len(w))

    def inference_weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The gates' weights as eval mode applies them, fp32 and detached: input weights and
        bias with BatchNorm folded in, then the recurrent ones (`_gru_kernel`'s params)."""
        if self.training:
            raise RuntimeError("inference_weights are eval mode's: call eval() first")
        w, b = self._input_weights(self.input_proj.weight.new_zeros(1, 0, 1), None)
        u, b_u = self.recurrent.weight, self.recurrent.bias
        return w.detach().float(), b.detach().float(), u.detach().float(), b_u.detach().float()

    def _fusable(self, h: Tensor) -> bool:
        """Where torch's fused GRU is used: CUDA, fp32/fp64 on the CPU, and bf16 on the CPU
        for inference (training keeps its recurrent state in fp32 under autocast)."""
        cpu_ok = (torch.float32, torch.float64) + (
            () if torch.is_grad_enabled() else (torch.bfloat16,)
        )
        return h.is_cuda or h.dtype in cpu_ok

    def _gru_kernel(self, x: Tensor, h: Tensor, w: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        """torch's fused GRU (cuDNN on CUDA) with input weights w [3H, D] and bias b, in h's
        dtype: gates = x w^T + b + U h + b_U, as `_cell` computes them. An int8 model's layers
        run their prepacked int8 copy of the same weights instead."""
        if self.int8 is not None and not self.training:
            return self.int8(x, h)
        dt = h.dtype
        params = [w.to(dt), self.recurrent.weight.to(dt), b.to(dt), self.recurrent.bias.to(dt)]
        out, h_n = torch._VF.gru(
            x.to(dt).contiguous(),
            h[None].contiguous(),
            params,
            True,
            1,
            0.0,
            self.training,
            False,
            True,
        )
        return out, h_n[0]

    def _cell(self, u_t: Tensor, h: Tensor) -> Tensor:
        # State math runs in h's dtype: fp32 under autocast training, the model's otherwise.
        w = self.recurrent(h).to(h.dtype)
        u_t = u_t.to(h.dtype)
        if not self.gru:
            return clipped_relu(u_t + w, self.clip)
        ur, uz, un = u_t.chunk(3, dim=-1)
        wr, wz, wn = w.chunk(3, dim=-1)
        r = torch.sigmoid(ur + wr)
        z = torch.sigmoid(uz + wz)
        n = torch.tanh(un + r * wn)
        return torch.lerp(n, h, z)


class RowConv(nn.Module):
    """Row convolution (DS2 §3.7): out[t] = sum_{j=0..tau} W[:, j] * h[t + j], per feature.
    `forward` pads tau zeros on the right; streaming keeps the last tau inputs instead."""

    def __init__(self, hidden: int, tau: int) -> None:
        super().__init__()
        self.tau = tau
        self.weight = nn.Parameter(torch.zeros(hidden, 1, tau + 1))
        with torch.no_grad():
            self.weight[:, 0, 0] = 1.0  # starts as identity: no look-ahead until learnt

    def compute(self, h: Tensor) -> Tensor:
        """h [B, T + tau, H] (already padded or buffered) -> [B, T, H]."""
        y = F.conv1d(h.transpose(1, 2), self.weight.to(h.dtype), groups=h.shape[-1])
        return y.transpose(1, 2)


class DS2(nn.Module):
    """The acoustic model. Input: raw log-spectrogram frames; the per-bin normalisation
    measured on the training set is part of the model (buffers `feat_mean`, `feat_std`)."""

    feat_mean: Tensor
    feat_std: Tensor

    def __init__(self, config: ModelConfig, folded: bool = False) -> None:
        super().__init__()
        self.config, self.folded = config, folded
        self.provenance: dict[str, object] = {}  # filled by load_bundle from config.json
        n_bins = config.features.n_bins
        self.register_buffer("feat_mean", torch.zeros(n_bins))
        self.register_buffer("feat_std", torch.ones(n_bins))
        self.convs = nn.ModuleList()
        in_ch, bins = (1, n_bins) if config.conv_type == "2d" else (n_bins, 1)
        for i in range(config.conv_layers):
            layer = ConvLayer(config, i, in_ch, folded)
            bins = layer.out_features(bins) if config.conv_type == "2d" else 1
            in_ch = config.conv_channels
            self.convs.append(layer)
        rnn_in = in_ch * bins
        self.rnns = nn.ModuleList()
        for i in range(config.rnn_layers):
            residual = i >= config.rnn_layers - config.rnn_residual_layers
            self.rnns.append(RecurrentLayer(config, rnn_in, folded, residual))
            rnn_in = config.rnn_hidden
        self.row_conv = RowConv(config.rnn_hidden, config.row_conv_tau)
        self.output = nn.Linear(config.rnn_hidden, config.vocab_size)

    @property
    def conv_stack(self) -> list[ConvLayer]:
        return [cast(ConvLayer, m) for m in self.convs]

    @property
    def rnn_stack(self) -> list[RecurrentLayer]:
        return [cast(RecurrentLayer, m) for m in self.rnns]

    def normalize(self, feats: Tensor) -> Tensor:
        """Per-bin mean/variance normalisation with the training set's statistics."""
        return (feats - self.feat_mean.to(feats.dtype)) / self.feat_std.to(feats.dtype)

    def output_lengths(self, lengths: Tensor) -> Tensor:
        """Output frames for input lengths: ceil(T / time_stride)."""
        s = self.config.time_stride
        return torch.div(lengths + s - 1, s, rounding_mode="floor")

    def conv_input(self, x: Tensor) -> Tensor:
        """[B, T, F] -> the first conv's layout ([B, 1, F, T] or [B, F, T])."""
        x = x.transpose(1, 2)
        return x.unsqueeze(1) if self.config.conv_type == "2d" else x

    @staticmethod
    def flatten(y: Tensor) -> Tensor:
        """Conv output -> [B, T, C * F] sequence."""
        if y.dim() == 4:
            y = y.flatten(1, 2)
        return y.transpose(1, 2)

    def head(self, r: Tensor) -> Tensor:
        """Row-conv output [B, T, H] -> log-probs [B, T, V] (softmax in fp32)."""
        return F.log_softmax(self.output(r).float(), dim=-1)

    def forward(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """feats [B, T, F] raw log-spectrogram, lengths [B] frames ->
        (log_probs [B, T', V] float32, out_lengths [B]). Steps past a length are padding."""
        r, n = self.encode(feats, lengths)
        if r.shape[1] == 0:
            return r.new_zeros(*r.shape[:2], self.config.vocab_size, dtype=torch.float32), n
        return self.head(r), n

    def encode(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The row-conv output [B, T', H] that the head reads, and out_lengths [B]; training
        reads it too (an extra loss on the hidden state, training/extra_loss.py)."""
        layers, n = self.encode_layers(feats, lengths)
        return layers[-1], n

    def encode_layers(self, feats: Tensor, lengths: Tensor) -> tuple[list[Tensor], Tensor]:
        """Every recurrent layer's output [B, T', H], then the row-conv output, and
        out_lengths [B]."""
        B, T, _ = feats.shape
        if T == 0:
            empty = feats.new_zeros(B, 0, self.config.rnn_hidden)
            return [empty] * (len(self.rnn_stack) + 1), lengths * 0
        feats = feats.to(self.feat_mean.dtype)
        x = self.normalize(feats) * time_mask(lengths, T)[:, :, None].to(feats.dtype)
        x = self.conv_input(x)
        n = lengths
        for layer in self.conv_stack:
            g = layer.geom
            n = torch.div(n + g.stride - 1, g.stride, rounding_mode="floor")
            x = F.pad(x, (g.pad, g.pad))
            x = layer.compute(x, time_mask(n, (x.shape[-1] - g.kernel) // g.stride + 1))
        h = self.flatten(x)
        mask = time_mask(n, h.shape[1])
        layers = []
        for rnn in self.rnn_stack:
            h = rnn(h, mask, feats.new_zeros(B, rnn.hidden))
            h = h * mask[:, :, None].to(h.dtype)
            layers.append(h)
        layers.append(self.row_conv.compute(F.pad(h, (0, 0, 0, self.row_conv.tau))))
        return layers, n

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
