"""ModelRunner: the compute side of Batch Dispatch, one per device.

It owns the model and every stream's recurrent state. One batch = stack the states of its
streams, `step` (or `flush` for streams that end), unstack, and hand back each stream's real
output rows as numpy. The torch work runs on one dedicated thread so the event loop stays
free to take audio and send results while a step computes.

How a stream becomes rows and how they merge back is `models/rows.py`'s, shared with the
offline forward. With the model's speaker adaptation on (`models/warp.py`), a stream that has
not yet chosen its warp is several rows of the batch, one per candidate factor, each with its
own state; their outputs merge into the stream's one output and, once it has chosen, the other
rows' states are dropped (a model whose `warp_merge` is "mean" never chooses: its streams keep
every row and average them to the end). A file that was fitted an input transform before its
first step (`models/input_adaptation.py`, `fit_input`) runs each candidate twice, as it is and
through its transform, and the pair's mean is that candidate's output. A live stream that
adapts to its speaker is sent the speaker's profile (fitted the same way, on the fit thread,
from the stream's own audio) with any chunk: from then on each candidate's one row hears its
chunks through it; the recurrent states carry on.

Steps run at few shapes. oneDNN, which runs the CPU kernels, compiles a primitive per input
shape and keeps it in a cache of 1024 with a buffer the size of the layer's weights (1.1 MiB
for one 384 x 1152 bf16 Linear; 2.4 MiB per step shape for the default model, measured). With
a shape per batch size and backlog length, the server's memory grew for the whole of a soak
as new shapes came up, and each new one cost its first step the compile. So batches are
padded with idle rows to a few sizes (`padded_rows`), last steps to a multiple of
FLUSH_FRAMES (every layer then runs at that length, as in a step), sessions send backlogs in
power-of-two multiples of their chunk, long steps take a few streams at a time, and warm-up
steps each of these shapes once (`warm_plan`, `warm`): the engine runs a stream's own shapes
before the server answers ready and, by default, the others on the model thread while no
stream is open (`warm_later`). A file heard with input adaptation steps twice a stream's rows: a
server that adapts every file (`--adapt-files`) warms those sizes too; otherwise they compile on
the first such file.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import torch

from models.bundle import PRECISIONS, load_bundle
from models.ds2 import DS2
from models.ensemble import load_networks
from models.input_adaptation import AdaptConfig, InputAdapter, InputTransforms
from models.rows import RowPlan, StreamRows, align_members, mix_members
from models.streaming import (
    StreamState,
    flush,
    flush_lengths,
    init_state,
    split_valid,
    stack_states,
    step,
    unstack_states,
)
from models.warp import row_plan
from server.dispatch import Work

F32 = npt.NDArray[np.float32]

EXACT_ROWS = 8  # batches of up to this many rows run at their own size
FLUSH_FRAMES = 16  # a stream's last step is padded to a multiple of this many frames
LONG_STEP_FRAMES = 64  # steps of this many frames or more (backlogs, files) ...
LONG_STEP_STREAMS = 8  # ... take at most this many streams at a time


def padded_rows(rows: int) -> int:
    """The batch size a step of `rows` rows runs at: exact up to EXACT_ROWS, then rounded
    up to a multiple of an eighth of the power of two below it (9-16 to even sizes, 17-32 to
    multiples of 4, ...): idle rows are 7% of a step on average (under a quarter at worst),
    and each doubling of the batch adds only four sizes."""
    if rows <= EXACT_ROWS:
        return rows
    quantum = 1 << ((rows - 1).bit_length() - 3)
    return -(-rows // quantum) * quantum


@dataclass(frozen=True)
class WarmShapes:
    """What warm-up covers: each padded batch size up to `max_streams` streams (times the
    warp candidates a new stream has, twice with `adapted`: every stream could be a file heard
    with input adaptation) for each chunk length in `lengths` and each length a flush of a
    tail of up to `max_tail` frames runs at (a flush at a length uses a step's kernels; -1:
    none), and up to LONG_STEP_STREAMS streams for each length in `backlog`."""

    lengths: tuple[int, ...] = ()
    max_streams: int = 1
    backlog: tuple[int, ...] = ()
    max_tail: int = -1
    adapted: bool = False


class WarmStep(NamedTuple):
    """One warm-up step: a shape (rows, input frames) of one network of the runner."""

    network: int
    rows: int
    frames: int


@dataclass(frozen=True)
class Chunk:
    """Raw log-spectrogram frames [T, F] of one stream.

    A chunk that is not a stream's last must hold a positive multiple of the model's time
    stride; the last one (the tail) may hold any number, zero included. A stream's first chunk
    may carry the input transforms fitted to its recording (`ModelRunner.fit_input`), which
    the stream keeps to its end. Any chunk may carry a speaker's `profile` (transforms fitted
    on the speaker's earlier speech): from that chunk on, the stream is heard through it
    alone, and a later profile replaces it. A stream takes one or the other, not both."""

    feats: F32
    transforms: InputTransforms | None = None
    profile: InputTransforms | None = None


@dataclass
class _Stream:
    """What the runner holds for one stream: its rows (`models/rows.py`) and a model state
    per row, in the rows' order."""

    states: list[StreamState]
    rows: StreamRows
    transforms: InputTransforms | None = None
    profile: InputTransforms | None = None  # each candidate's one row heard through it


@dataclass(frozen=True)
class _Row:
    """One row of a batch: a stream's chunk under one warp factor."""

    item: int  # index of the stream's work in the batch
    feats: torch.Tensor  # [T, F] raw, warped
    state: StreamState


class ModelRunner:
    """Runs batches of stream chunks through a streaming DS2; implements `Runner`."""

    def __init__(self, model: DS2, adapter: InputAdapter | None = None) -> None:
        """`adapter` fits files' input transforms (`fit_input`); without one, none can."""
        if model.training:
            raise ValueError("ModelRunner needs an eval-mode model (call model.eval())")
        self.model = model
        self.adapter = adapter
        self.device = next(model.parameters()).device
        self._streams: dict[int, _Stream] = {}
        self._idle = init_state(model, 1)  # the state of a padding row (never updated)
        self._shapes: set[tuple[int, int]] = set()  # (rows, output frames) of steps run
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        # fits run beside the steps, not between them: a file's fit takes a fraction of its
        # length, which live streams' steps must not wait for
        self._fits = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adapt")

    @classmethod
    def from_bundle(
        cls, path: str, device: str = "cpu", dtype: str = "fp32", speaker_adaptation: bool = True
    ) -> ModelRunner:
        """The bundle's model; `speaker_adaptation=False` ignores its warp factors."""
        if dtype not in PRECISIONS:
            raise ValueError(f"dtype must be one of {PRECISIONS}, got {dtype!r}")
        runner = cls.serving(load_bundle(path, device=device, dtype=dtype), speaker_adaptation)
        runner.adapter = _adapter(path, device, runner.model, AdaptConfig())
        return runner

    @classmethod
    def serving(cls, model: DS2, speaker_adaptation: bool = True) -> ModelRunner:
        """A runner of a loaded network; `speaker_adaptation=False` ignores its warp factors."""
        if not speaker_adaptation:
            model.config = dataclasses.replace(model.config, warp_factors=())
        return cls(model)  # its row plan follows the config as served

    @property
    def plan(self) -> RowPlan:
        """How a stream becomes rows and merges back, by the model's config as served."""
        return row_plan(self.model.config)

    @property
    def streams(self) -> int:
        """Streams whose state the runner holds."""
        return len(self._streams)

    @property
    def shapes(self) -> int:
        """Distinct step shapes run so far: each costs a compile and a weight-sized buffer,
        so after start-up this should hardly grow."""
        return len(self._shapes)

    async def run(self, batch: Sequence[Work[Chunk]]) -> list[F32]:
        """Per item, log-probs [t, V] float32 of the output frames that became final."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self.run_sync, list(batch))

    async def fit_input(self, feats: F32, config: AdaptConfig | None = None) -> InputTransforms:
        """The input transforms of a recording's raw frames [T, F], for its first chunk (or
        a speaker's profile, fitted by `config`, for any chunk)."""
        if self.adapter is None:
            raise ValueError("this model runner was built without input adaptation")
        if len(feats) == 0:
            raise ValueError("input adaptation needs at least one frame of audio")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._fits, self.adapter.fit, feats, config)

    def release(self, stream: int) -> None:
        self._streams.pop(stream, None)

    def close(self) -> None:
        self._fits.shutdown(wait=True, cancel_futures=True)
        self._thread.shutdown(wait=True, cancel_futures=True)
        self._streams.clear()

    def run_sync(self, batch: list[Work[Chunk]]) -> list[F32]:
        """The batch on the calling thread; steps are grouped by chunk length, since a step
        needs one T for all its streams, and the ending streams are flushed together."""
        self._check(batch)
        out: dict[int, F32] = {}
        groups: dict[int | None, list[int]] = defaultdict(list)
        for i, work in enumerate(batch):
            groups[None if work.last else len(work.chunk.feats)].append(i)
        # ending streams first: their finals wait on this step (end-of-utterance latency),
        # the others' next partials less so
        groups = dict(sorted(groups.items(), key=lambda group: group[0] is not None))
        with torch.inference_mode():
            for length, items in groups.items():
                # backlog steps go at most LONG_STEP_STREAMS streams at a time: the sizes
                # warm-up compiled for them (and a long step is efficient at a few rows)
                size = LONG_STEP_STREAMS if (length or 0) >= LONG_STEP_FRAMES else len(items)
                for start in range(0, len(items), size):
                    part = items[start : start + size]
                    chosen = [batch[i] for i in part]
                    results = self._flush(chosen) if length is None else self._step(chosen)
                    out.update(zip(part, results, strict=True))
        return [out[i] for i in range(len(batch))]

    def warmup(self, cover: WarmShapes | None = None) -> None:
        """Throwaway steps, so that no real request pays for lazy init or for compiling a
        kernel: `prime`, then every step of `warm_plan`."""
        self.prime()
        self.warm(self.warm_plan(cover or WarmShapes()))

    def prime(self) -> None:
        """One throwaway flush: the lazy init (thread pools, allocators) that the very first
        step of a process pays, whatever its shape."""
        stride, n_bins = self.model.config.time_stride, self.model.config.features.n_bins
        feats = np.zeros((4 * stride, n_bins), np.float32)
        self.run_sync([Work(-1, Chunk(feats), last=True)])

    def warm_plan(self, cover: WarmShapes) -> list[WarmStep]:
        """The step shapes a server will run, cheapest first (`cover` says which)."""
        lengths, max_tail, max_streams = cover.lengths, cover.max_tail, cover.max_streams
        candidates = self.plan.candidates * (2 if cover.adapted else 1)

        def sizes(streams: int) -> list[int]:
            return sorted({padded_rows(n) for n in range(1, streams * candidates + 1)})

        ends = flush_lengths(self.model, max_tail, FLUSH_FRAMES) if max_tail >= 0 else []
        shapes = [(n, t) for t in sorted({*lengths, *ends}) for n in sizes(max_streams)]
        long = sorted(set(cover.backlog) - {*lengths, *ends})
        shapes += [(n, t) for t in long for n in sizes(min(max_streams, LONG_STEP_STREAMS))]
        return [WarmStep(0, n, t) for n, t in sorted(shapes, key=lambda s: (s[0] * s[1], s))]

    def warm(self, steps: Sequence[WarmStep]) -> None:
        """A step of each shape from idle states, on the calling thread (no stream's state
        is touched, so this may run between real batches on the model thread)."""
        n_bins = self.model.config.features.n_bins
        with torch.inference_mode():
            for _, n, t in steps:
                x = torch.zeros(n, t, n_bins, device=self.device)
                log_probs, _ = step(self.model, x, stack_states([self._idle] * n))
                self._shapes.add((log_probs.shape[0], log_probs.shape[1]))

    async def warm_later(self, step: WarmStep) -> None:
        """`warm` of one shape on the model thread, between real batches: a batch waits
        behind one at most."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self.warm, [step])

    def _check(self, batch: list[Work[Chunk]]) -> None:
        n_bins, stride = self.model.config.features.n_bins, self.model.config.time_stride
        for work in batch:
            shape = work.chunk.feats.shape
            if len(shape) != 2 or shape[1] != n_bins:
                raise ValueError(f"stream {work.stream}: feats must be [T, {n_bins}], got {shape}")
            if not work.last and (shape[0] == 0 or shape[0] % stride):
                raise ValueError(
                    f"stream {work.stream}: a chunk needs a positive multiple of {stride} frames, "
                    f"got {shape[0]}; send the remainder with the last chunk"
                )

    def _stream(self, work: Work[Chunk]) -> _Stream:
        held = self._streams.get(work.stream)
        transforms, profile = work.chunk.transforms, work.chunk.profile
        if held is not None and transforms is not None:
            raise ValueError(
                f"stream {work.stream}: input transforms come with a stream's first chunk only"
            )
        if held is None:
            self._check_candidates(work.stream, transforms)
            rows = StreamRows.start(self.plan, adapted=transforms is not None)
            states = [init_state(self.model, 1) for _ in range(rows.count)]
            held = _Stream(states, rows, transforms)
        if profile is not None:
            self._check_candidates(work.stream, profile)
            if held.transforms is not None:
                raise ValueError(
                    f"stream {work.stream}: a stream heard through a file's input transforms "
                    "takes no speaker profile"
                )
            held.profile = profile  # the recurrent states carry on: the voice is the same
        return held

    def _check_candidates(self, stream: int, transforms: InputTransforms | None) -> None:
        candidates = self.plan.candidates
        if transforms is not None and transforms.candidates != candidates:
            raise ValueError(
                f"stream {stream}: {transforms.candidates} input transforms for a model "
                f"with {candidates} warp candidates; fit them with this runner's fit_input"
            )

    def _rows(self, batch: list[Work[Chunk]]) -> tuple[list[_Stream], list[_Row]]:
        """Each stream's chunk as its rows (`StreamRows.expand`), each with its state."""
        streams, rows = [], []
        for i, work in enumerate(batch):
            held = self._stream(work)
            streams.append(held)
            feats = torch.from_numpy(work.chunk.feats).to(self.device)
            expanded = held.rows.expand(feats, held.transforms, held.profile)
            rows += [_Row(i, x, s) for x, s in zip(expanded, held.states, strict=True)]
        return streams, rows

    def _merge(
        self, streams: list[_Stream], rows: list[_Row], outputs: list[torch.Tensor]
    ) -> list[F32]:
        """Per stream, its rows' outputs merged (`StreamRows.merge`), in batch order; a stream
        that has just chosen its warp keeps the chosen rows' states alone."""
        per_item: dict[int, list[F32]] = defaultdict(list)
        for row, out in zip(rows, outputs, strict=True):
            per_item[row.item].append(_numpy(out))
        merged = []
        for i, held in enumerate(streams):
            frames, keep = held.rows.merge(per_item[i])
            merged.append(frames)
            if keep is not None:
                held.states = held.states[keep]
        return merged

    def _padding(self, rows: list[_Row], length: int) -> list[_Row]:
        """Idle rows (`length` zero frames from the idle state) up to the padded size;
        their outputs and states are thrown away."""
        n_bins, idle = self.model.config.features.n_bins, self._idle
        feats = torch.zeros(length, n_bins, device=self.device)
        return [_Row(-1, feats, idle)] * (padded_rows(len(rows)) - len(rows))

    def _step(self, batch: list[Work[Chunk]]) -> list[F32]:
        streams, rows = self._rows(batch)
        padded = rows + self._padding(rows, len(rows[0].feats))
        states = stack_states([r.state for r in padded])
        log_probs, new = step(self.model, torch.stack([r.feats for r in padded]), states)
        self._shapes.add((log_probs.shape[0], log_probs.shape[1]))
        fresh = unstack_states(new)[: len(rows)]
        for i, (work, held) in enumerate(zip(batch, streams, strict=True)):
            held.states = [s for r, s in zip(rows, fresh, strict=True) if r.item == i]
            self._streams[work.stream] = held
        return self._merge(streams, rows, split_valid(log_probs, new)[: len(rows)])

    def _flush(self, batch: list[Work[Chunk]]) -> list[F32]:
        streams, rows = self._rows(batch)
        padded = rows + self._padding(rows, 0)
        states = stack_states([r.state for r in padded])
        lengths = [len(r.feats) for r in padded]
        n_bins = self.model.config.features.n_bins
        tail = torch.zeros(len(padded), max(lengths), n_bins, device=self.device)
        for b, row in enumerate(rows):
            tail[b, : lengths[b]] = row.feats
        log_probs, new = flush(
            self.model,
            states,
            tail,
            torch.tensor(lengths, dtype=torch.long, device=self.device),
            frames_multiple=FLUSH_FRAMES,
        )
        self._shapes.add((log_probs.shape[0], log_probs.shape[1]))
        for work in batch:
            self._streams.pop(work.stream, None)
        return self._merge(streams, rows, split_valid(log_probs, new)[: len(rows)])


class EnsembleRunner:
    """A bundle with several networks (`models/ensemble.py`): one `ModelRunner` each, fed the
    same chunks, and per stream the weighted mean of their probabilities; implements
    `Runner`. Each member keeps its own states and speaker warps. A member whose row
    convolution sees further ahead emits its frames later: the others' are held, per stream,
    until every member has emitted them, and the stream's last chunk emits them all."""

    def __init__(self, runners: list[ModelRunner], weights: list[float]) -> None:
        if len(runners) != len(weights) or len(runners) < 2:
            raise ValueError("an ensemble needs two or more runners, one weight each")
        self.runners, self.weights = runners, weights
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self._held: dict[int, list[F32]] = {}  # per stream, each member's frames not yet mixed

    @property
    def model(self) -> DS2:
        """The bundle's own network (members share the config fields that serving reads)."""
        return self.runners[0].model

    @property
    def streams(self) -> int:
        return self.runners[0].streams

    @property
    def shapes(self) -> int:
        return sum(r.shapes for r in self.runners)

    async def run(self, batch: Sequence[Work[Chunk]]) -> list[F32]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self.run_sync, list(batch))

    async def fit_input(self, feats: F32, config: AdaptConfig | None = None) -> InputTransforms:
        """The bundle's own network's transforms; the members hear the file as it is: the
        pair's gain from adaptation comes from its own network (experiments/adapt.md)."""
        return await self.runners[0].fit_input(feats, config)

    def run_sync(self, batch: list[Work[Chunk]]) -> list[F32]:
        # the first checks the batch; members hear the input as it is
        plain = [
            dataclasses.replace(w, chunk=Chunk(w.chunk.feats))
            if w.chunk.transforms or w.chunk.profile
            else w
            for w in batch
        ]
        per_member = [r.run_sync(batch if i == 0 else plain) for i, r in enumerate(self.runners)]
        out = []
        for work, emitted in zip(batch, zip(*per_member, strict=True), strict=True):
            ready, rest = align_members(self._held.pop(work.stream, None), emitted)
            if any(len(r) for r in rest):
                if work.last:
                    raise RuntimeError(
                        f"stream {work.stream}: ensemble members emitted "
                        f"{[len(a) + len(r) for a, r in zip(ready, rest, strict=True)]} "
                        "frames in all; their geometry differs"
                    )
                self._held[work.stream] = rest
            out.append(mix_members(ready, self.weights))
        return out

    def prime(self) -> None:
        for runner in self.runners:
            runner.prime()

    def warm_plan(self, cover: WarmShapes) -> list[WarmStep]:
        """Every member's `ModelRunner.warm_plan`, cheapest first: each network compiles its
        own shapes (only the own network's rows double for adapted files: members hear them
        as they are)."""
        steps = [
            WarmStep(i, n, t)
            for i, runner in enumerate(self.runners)
            for _, n, t in runner.warm_plan(
                dataclasses.replace(cover, adapted=cover.adapted and i == 0)
            )
        ]
        return sorted(steps, key=lambda s: (s.rows * s.frames, s))

    def warm(self, steps: Sequence[WarmStep]) -> None:
        for s in steps:
            self.runners[s.network].warm([s])

    async def warm_later(self, step: WarmStep) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self.warm, [step])

    def release(self, stream: int) -> None:
        self._held.pop(stream, None)
        for runner in self.runners:
            runner.release(stream)

    def close(self) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)
        for runner in self.runners:
            runner.close()


def runner_for_bundle(
    path: str,
    device: str = "cpu",
    dtype: str = "fp32",
    speaker_adaptation: bool = True,
    ensemble: bool = True,
    adaptation: AdaptConfig | None = None,
) -> ModelRunner | EnsembleRunner:
    """The runner a bundle needs: one network, or each of its ensemble's members (loaded and
    checked as `harken eval` loads them; `ensemble=False`: its own network only), fitting
    files' input transforms as `adaptation` says (AdaptConfig's defaults without it)."""
    networks = load_networks(path, device, dtype, ensemble)
    runners = [ModelRunner.serving(m, speaker_adaptation) for m in networks.models]
    runners[0].adapter = _adapter(path, device, runners[0].model, adaptation or AdaptConfig())
    return runners[0] if len(runners) == 1 else EnsembleRunner(runners, networks.weights)


def _adapter(path: str, device: str, served: DS2, config: AdaptConfig) -> InputAdapter:
    """Fits for the bundle's own network as served (its warps, or none when switched off);
    fits need gradients, so from an fp32 copy of it, loaded on the first fit."""
    return InputAdapter(
        lambda: load_bundle(path, device=device, dtype="fp32"), served.config.warp_factors, config
    )


def _numpy(log_probs: torch.Tensor) -> F32:
    return np.ascontiguousarray(log_probs.float().cpu().numpy(), dtype=np.float32)
