"""ModelRunner: the compute side of Batch Dispatch, one per device.

It owns the model and every stream's recurrent state. One batch = stack the states of its
streams, `step` (or `flush` for streams that end), unstack, and hand back each stream's real
output rows as numpy. The torch work runs on one dedicated thread so the event loop stays
free to take audio and send results while a step computes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from models.bundle import DTYPES, load_bundle
from models.ds2 import DS2
from models.streaming import (
    StreamState,
    flush,
    init_state,
    split_valid,
    stack_states,
    step,
    unstack_states,
)
from server.dispatch import Work

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Chunk:
    """Raw log-spectrogram frames [T, F] of one stream.

    A chunk that is not a stream's last must hold a positive multiple of the model's time
    stride; the last one (the tail) may hold any number, zero included."""

    feats: F32


class ModelRunner:
    """Runs batches of stream chunks through a streaming DS2; implements `Runner`."""

    def __init__(self, model: DS2) -> None:
        if model.training:
            raise ValueError("ModelRunner needs an eval-mode model (call model.eval())")
        self.model = model
        self.device = next(model.parameters()).device
        self._states: dict[int, StreamState] = {}
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")

    @classmethod
    def from_bundle(cls, path: str, device: str = "cpu", dtype: str = "fp32") -> ModelRunner:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        return cls(load_bundle(path, device=device, dtype=DTYPES[dtype]))

    @property
    def streams(self) -> int:
        """Streams whose state the runner holds."""
        return len(self._states)

    async def run(self, batch: Sequence[Work[Chunk]]) -> list[F32]:
        """Per item, log-probs [t, V] float32 of the output frames that became final."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self.run_sync, list(batch))

    def release(self, stream: int) -> None:
        self._states.pop(stream, None)

    def close(self) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)
        self._states.clear()

    def run_sync(self, batch: list[Work[Chunk]]) -> list[F32]:
        """The batch on the calling thread; steps are grouped by chunk length, since a step
        needs one T for all its streams, and the ending streams are flushed together."""
        self._check(batch)
        out: dict[int, F32] = {}
        groups: dict[int | None, list[int]] = defaultdict(list)
        for i, work in enumerate(batch):
            groups[None if work.last else len(work.chunk.feats)].append(i)
        with torch.inference_mode():
            for length, items in groups.items():
                chosen = [batch[i] for i in items]
                results = self._flush(chosen) if length is None else self._step(chosen)
                out.update(zip(items, results, strict=True))
        return [out[i] for i in range(len(batch))]

    def warmup(self) -> None:
        """One throwaway step, so the first real request does not pay for lazy init."""
        stride = self.model.config.time_stride
        feats = np.zeros((4 * stride, self.model.config.features.n_bins), np.float32)
        self.run_sync([Work(-1, Chunk(feats), last=True)])

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

    def _state(self, stream: int) -> StreamState:
        state = self._states.get(stream)
        return init_state(self.model, 1) if state is None else state

    def _step(self, batch: list[Work[Chunk]]) -> list[F32]:
        states = stack_states([self._state(w.stream) for w in batch])
        feats = torch.from_numpy(np.stack([w.chunk.feats for w in batch])).to(self.device)
        log_probs, new = step(self.model, feats, states)
        for work, state in zip(batch, unstack_states(new), strict=True):
            self._states[work.stream] = state
        return [_numpy(x) for x in split_valid(log_probs, new)]

    def _flush(self, batch: list[Work[Chunk]]) -> list[F32]:
        states = stack_states([self._state(w.stream) for w in batch])
        lengths = [len(w.chunk.feats) for w in batch]
        tail = np.zeros((len(batch), max(lengths), self.model.config.features.n_bins), np.float32)
        for b, work in enumerate(batch):
            tail[b, : lengths[b]] = work.chunk.feats
        log_probs, new = flush(
            self.model,
            states,
            torch.from_numpy(tail).to(self.device),
            torch.tensor(lengths, dtype=torch.long, device=self.device),
        )
        for work in batch:
            self._states.pop(work.stream, None)
        return [_numpy(x) for x in split_valid(log_probs, new)]


def _numpy(log_probs: torch.Tensor) -> F32:
    return np.ascontiguousarray(log_probs.float().cpu().numpy(), dtype=np.float32)
