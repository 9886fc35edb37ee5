"""Chunked inference that equals `DS2.forward` on the whole utterance.

Every layer emits exactly `T / time_stride` output positions per step for every stream, so
streams of any age can share one batch. A fresh stream's buffers start full of zeros that
stand for the left padding; the first few positions it emits (the "pre-roll", as many as
the conv and row-conv look-ahead) are therefore not real outputs yet. `StreamState.valid`
marks, per stream, which rows of the last output are real; `split_valid` applies it.

Each layer computes a position only when its look-ahead has arrived, by holding back:
conv layers keep their last inputs, recurrent layers their hidden state, the row
convolution its last tau inputs. `flush` zero-pads every layer exactly as `forward` does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor

from models.ds2 import DS2


@dataclass
class StreamState:
    """Batch-first state of B streams. All tensors have the batch on dim 0."""

    conv: list[Tensor]  # per conv layer, its input buffer, time last: [B, C, F, L] or [B, C, L]
    hidden: list[Tensor]  # per recurrent layer [B, H]
    row: Tensor  # last tau recurrent outputs [B, tau, H]
    frames_in: Tensor  # [B] int64: input frames consumed so far
    emitted: Tensor  # [B] int64: output positions computed so far, pre-roll included
    valid: Tensor  # [B, T'] bool: rows of the last step's output that are real frames

    @property
    def batch(self) -> int:
        return int(self.frames_in.shape[0])


@dataclass(frozen=True)
class Plan:
    """Static streaming geometry of a model: buffer lengths and, per layer, the logical
    output index of its first emitted position (negative: pre-roll)."""

    conv_buffer: tuple[int, ...]
    conv_first: tuple[int, ...]
    rnn_first: int
    row_first: int


def plan(model: DS2) -> Plan:
    buffers: list[int] = []
    firsts: list[int] = []
    first = 0
    for i, layer in enumerate(model.conv_stack):
        k, s, p = layer.geom.kernel, layer.geom.stride, layer.geom.pad
        if i == 0:
            r = (-(k - s - p)) % s
            length = k - s + r  # steady-state buffer; (length - p) is a multiple of s
            first = -(length - p) // s
        else:
            length, first = k - 1, first - p
        buffers.append(length)
        firsts.append(first)
    return Plan(tuple(buffers), tuple(firsts), first, first - model.row_conv.tau)


def init_state(model: DS2, batch: int) -> StreamState:
    """Fresh state for `batch` streams, on the model's device and dtype."""
    p = next(model.parameters())
    dev, dt = p.device, p.dtype
    cfg, pl = model.config, plan(model)
    conv, ch, bins = [], 1, cfg.features.n_bins
    for layer, length in zip(model.conv_stack, pl.conv_buffer, strict=True):
        shape = (
            (batch, ch, bins, length) if layer.is2d else (batch, bins if ch == 1 else ch, length)
        )
        conv.append(torch.zeros(shape, device=dev, dtype=dt))
        bins = layer.out_features(bins) if layer.is2d else bins
        ch = cfg.conv_channels
    hidden = [torch.zeros(batch, cfg.rnn_hidden, device=dev, dtype=dt) for _ in model.rnn_stack]
    zeros_i = torch.zeros(batch, dtype=torch.long, device=dev)
    return StreamState(
        conv=conv,
        hidden=hidden,
        row=torch.zeros(batch, cfg.row_conv_tau, cfg.rnn_hidden, device=dev, dtype=dt),
        frames_in=zeros_i,
        emitted=zeros_i.clone(),
        valid=torch.zeros(batch, 0, dtype=torch.bool, device=dev),
    )


def stack_states(states: list[StreamState]) -> StreamState:
    """Concatenate streams along the batch (the per-step `valid` rows are reset)."""
    assert states, "stack_states needs at least one state"

    def cat(ts: list[Tensor]) -> Tensor:
        return torch.cat(ts, dim=0)

    return StreamState(
        conv=[cat([s.conv[i] for s in states]) for i in range(len(states[0].conv))],
        hidden=[cat([s.hidden[i] for s in states]) for i in range(len(states[0].hidden))],
        row=cat([s.row for s in states]),
        frames_in=cat([s.frames_in for s in states]),
        emitted=cat([s.emitted for s in states]),
        valid=torch.zeros(sum(s.batch for s in states), 0, dtype=torch.bool),
    )


def unstack_states(state: StreamState) -> list[StreamState]:
    """Split a batched state into one state per stream (views, no copies)."""
    out = []
    for b in range(state.batch):
        sl = slice(b, b + 1)
        out.append(
            StreamState(
                conv=[t[sl] for t in state.conv],
                hidden=[t[sl] for t in state.hidden],
                row=state.row[sl],
                frames_in=state.frames_in[sl],
                emitted=state.emitted[sl],
                valid=state.valid[sl],
            )
        )
    return out


def split_valid(log_probs: Tensor, state: StreamState) -> list[Tensor]:
    """Per stream, the real rows [t_b, V] of the output of the step that produced `state`."""
    return [log_probs[b][state.valid[b]] for b in range(state.batch)]


def _mask(first: int, emitted: Tensor, t: int, n_out: Tensor | None) -> Tensor:
    logical = first + emitted[:, None] + torch.arange(t, device=emitted.device)[None, :]
    ok = logical >= 0
    return ok if n_out is None else ok & (logical < n_out[:, None])


@torch.no_grad()
def _advance(
    model: DS2, x: Tensor, state: StreamState, n_out: Tensor | None, trim_multiple: int = 1
) -> tuple[Tensor, StreamState]:
    """Run normalised, zero-padded frames x [B, T, F] (T a multiple of the stride).
    The recurrence stops after the last position a stream needs, rounded up to
    `trim_multiple` positions (held states past it), so that its kernels see few shapes."""
    pl, B = plan(model), x.shape[0]
    t_out = x.shape[1] // model.config.time_stride
    if t_out == 0:
        empty = torch.zeros(B, 0, model.config.vocab_size, device=x.device)
        return empty, StreamState(**{**vars(state), "valid": torch.zeros(B, 0, dtype=torch.bool)})
    y, new_conv = model.conv_input(x), []
    for layer, buf, first in zip(model.conv_stack, state.conv, pl.conv_first, strict=True):
        full = torch.cat([buf, y], dim=-1)
        y = layer.compute(full, _mask(first, state.emitted, t_out, n_out))
        new_conv.append(full[..., t_out * layer.geom.stride :])
    h, new_hidden = model.flatten(y), []
    mask = _mask(pl.rnn_first, state.emitted, t_out, n_out)
    # At a flush the last positions are past every stream's end (the row convolution's
    # look-ahead, zero-padded): their recurrent outputs are zeroed and states held, so
    # the step-by-step recurrence stops at the last position any stream still needs.
    live = torch.nonzero(mask.any(dim=0)).flatten()
    used = int(live[-1]) + 1 if len(live) else 0
    used = min(t_out, -(-used // trim_multiple) * trim_multiple)
    h, mask_used = h[:, :used], mask[:, :used]
    for rnn, h0 in zip(model.rnn_stack, state.hidden, strict=True):
        h, h_last = rnn.run(h, h0, mask_used)
        h = h * mask_used[:, :, None].to(h.dtype)
        new_hidden.append(h_last)
    h = F.pad(h, (0, 0, 0, t_out - used))
    full = torch.cat([state.row, h], dim=1)
    log_probs = model.head(model.row_conv.compute(full))
    tau = model.row_conv.tau
    new = StreamState(
        conv=new_conv,
        hidden=new_hidden,
        row=full[:, full.shape[1] - tau :],
        frames_in=state.frames_in,
        emitted=state.emitted + t_out,
        valid=_mask(pl.row_first, state.emitted, t_out, n_out),
    )
    assert log_probs.shape[:2] == (B, t_out)
    return log_probs, new


def _check(model: DS2, feats: Tensor, state: StreamState) -> None:
    if model.training:
        raise RuntimeError("streaming needs model.eval(): BatchNorm must use running statistics")
    if feats.dim() != 3 or feats.shape[0] != state.batch:
        raise ValueError(f"feats must be [B={state.batch}, T, F], got {tuple(feats.shape)}")
    if feats.shape[2] != model.config.features.n_bins:
        raise ValueError(
            f"feats have {feats.shape[2]} bins, model expects {model.config.features.n_bins}"
        )


def step(model: DS2, feats: Tensor, state: StreamState) -> tuple[Tensor, StreamState]:
    """Feed feats [B, T, F] (raw log-spectrogram; T a multiple of the time stride).
    Returns log_probs [B, T / stride, V] and the new state; `state.valid` marks real rows."""
    _check(model, feats, state)
    s = model.config.time_stride
    if feats.shape[1] % s:
        raise ValueError(
            f"step needs a multiple of {s} frames, got {feats.shape[1]}; pass the rest to flush"
        )
    x = model.normalize(feats.to(state.row.dtype))
    log_probs, new = _advance(model, x, state, None)
    new.frames_in = state.frames_in + feats.shape[1]
    return log_probs, new


def flush(
    model: DS2,
    state: StreamState,
    tail: Tensor | None = None,
    tail_lengths: Tensor | None = None,
    frames_multiple: int = 1,
) -> tuple[Tensor, StreamState]:
    """End the streams: feed their last frames `tail` [B, t, F] (any t; `tail_lengths` [B]
    when they differ), then zero-pad every layer as `forward` does and emit what remains.
    The padded input is rounded up to `frames_multiple` frames (more zeros change nothing;
    fewer input lengths mean fewer kernel shapes for a server to compile and cache).
    Returns log_probs [B, T', V]; `state.valid` marks each stream's real rows."""
    B, s, dev = state.batch, model.config.time_stride, state.frames_in.device
    n_bins = model.config.features.n_bins
    if tail is None:
        tail = torch.zeros(B, 0, n_bins, device=dev)
    _check(model, tail, state)
    t = tail.shape[1]
    lengths = (
        torch.full((B,), t, dtype=torch.long, device=dev) if tail_lengths is None else tail_lengths
    )
    total = state.frames_in + lengths
    n_out = model.output_lengths(total)
    needed = int((n_out - plan(model).row_first - state.emitted).clamp_min(0).max())
    z = _padded_frames(s * needed, t, s, frames_multiple)
    x = torch.zeros(B, z, n_bins, device=dev, dtype=state.row.dtype)
    if t:
        keep = (torch.arange(t, device=dev)[None, :] < lengths[:, None])[:, :, None]
        x[:, :t] = model.normalize(tail.to(x.dtype)) * keep.to(x.dtype)
    # the recurrence runs to a multiple of frames_multiple too (a few held steps more): each
    # layer of a flush then has the shape it has in a step of a multiple of frames_multiple
    trim = _stride_multiple(frames_multiple, s) // s
    log_probs, new = _advance(model, x, state, n_out, trim_multiple=trim)
    new.frames_in = total
    return log_probs, new


def _stride_multiple(frames_multiple: int, stride: int) -> int:
    """`frames_multiple` rounded up to a multiple of the stride."""
    return stride * -(-frames_multiple // stride)


def _padded_frames(needed: int, t: int, stride: int, frames_multiple: int) -> int:
    """Input frames of a flush that needs `needed` frames and has a tail of `t`."""
    z = max(needed, -(-t // stride) * stride)
    multiple = _stride_multiple(frames_multiple, stride)
    return -(-z // multiple) * multiple


def flush_lengths(model: DS2, max_tail: int, frames_multiple: int) -> list[int]:
    """The step lengths whose kernels a `flush` of a tail of 0 to `max_tail` frames uses (for
    a server's warm-up): every multiple of `frames_multiple` (rounded to the stride) up to
    the longest flush, since its input and its recurrence each run at one of them. A state
    that only `step` advanced has fed a multiple of the stride and emitted one position per
    stride of it, so the longest flush depends on the tail alone: its outputs plus the
    look-ahead still owed."""
    s, owed = model.config.time_stride, -plan(model).row_first
    longest = _padded_frames(s * (-(-max_tail // s) + owed), max_tail, s, frames_multiple)
    multiple = _stride_multiple(frames_multiple, s)
    return list(range(multiple, longest + 1, multiple))


def state_nbytes(state: StreamState) -> int:
    """Memory held by a state, for capacity planning and metrics."""
    total = 0
    for f in fields(state):
        v = getattr(state, f.name)
        for t in v if isinstance(v, list) else [v]:
            total += t.numel() * t.element_size()
    return total
