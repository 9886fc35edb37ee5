"""The serving engine: what every session shares (model runner, Batch Dispatch, decoders),
defined where it is built and torn down.

The app's lifespan and the in-process `harken transcribe` share this, so both run the
very same path from audio to text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from decoder.beam import warm_up
from decoder.loading import DECODER_JSON, read_decoder_json
from models.config import FeatureConfig, ModelConfig
from models.ensemble import alone_search
from models.input_adaptation import AdaptConfig, InputTransforms, ProfileSchedule
from models.punctuation import META, Punctuator
from server.adaptation import ProfileFits
from server.config import ServerConfig
from server.decoder_procs import DecoderProcess, start_processes
from server.decoding import Decoder, DecoderPool, build_decoder
from server.dispatch import BatchDispatcher, DispatchObserver
from server.memory import settle_heap
from server.precision import resolve_dtype
from server.profiles import network_digest
from server.runner import (
    F32,
    Chunk,
    EnsembleRunner,
    ModelRunner,
    WarmShapes,
    WarmStep,
    runner_for_bundle,
)
from server.written import load_punctuator

log = logging.getLogger("harken.server")

IDLE_POLL_S = 0.1  # how often background warm-up looks for a moment without streams


@dataclass
class Engine:
    """The shared parts a session uses, built once in the app's lifespan."""

    dispatcher: BatchDispatcher[Chunk, F32]
    pool: DecoderPool  # the decoder workers, each with its decoder
    features: FeatureConfig
    chunk_frames: int  # frames per live step: a multiple of the model's time stride
    max_chunk_frames: int  # most frames in one step when audio is backlogged
    max_samples: int  # longest live stream, in samples at the model's rate
    max_file_samples: int  # longest recording (REST, `harken transcribe`), the same way
    frame_seconds: float  # seconds per model output frame (hop x time stride)
    fit_input_s: float = 30.0  # the start of a recording its input transforms are fitted on
    load_chunk_frames: int = 0  # frames per live step while the model lags; 0: chunk_frames
    load_wait_s: float = 0.0  # the lag (mean queue wait) past which load_chunk_frames apply
    # the beam search's score threshold while the model lags (None: the bundle's at any load)
    load_threshold: float | None = None
    narrowed: int = 0  # decoder calls that searched with load_threshold (a metric)
    model_states: Callable[[], int] = lambda: 0  # streams whose recurrent state the model holds
    step_shapes: Callable[[], int] = lambda: 0  # distinct (rows, frames) shapes stepped so far
    # fits a recording's input transforms from its raw frames (the runner's `fit_input`);
    # None: this engine cannot adapt to files
    fit_input: Callable[[F32], Awaitable[InputTransforms]] | None = None
    # fits a speaker's profile from a stream's raw frames (by `profiles.config`); None:
    # streams cannot adapt to their speakers
    fit_profile: Callable[[F32, AdaptConfig], Awaitable[InputTransforms]] | None = None
    profiles: ProfileSchedule = ProfileSchedule()  # when a stream fits its speaker's profile
    profile_fits: ProfileFits = field(default_factory=ProfileFits)  # the fits under way
    network: bytes = b""  # the digest a profile token names its network by (server/profiles.py)
    candidates: int = 1  # a profile's rows: the own network's warp candidates as served
    # writes transcripts with punctuation and capitals (server/written.py) for the streams
    # that ask; None: the bundle has none, or --no-punctuation, and every transcript is plain
    punctuator: Punctuator | None = None

    def frame_s(self, frames: int) -> float:
        """Seconds of `frames` input frames."""
        return frames * self.features.hop_ms / 1000

    def lagging(self) -> bool:
        """Whether chunks now wait longer for their model step than `load_wait_s`: the one
        load signal that both bigger chunks and a narrower search follow."""
        return self.dispatcher.queue_wait_s > self.load_wait_s

    def step_frames(self) -> int:
        """Frames a live stream sends per step now: bigger chunks while the model lags, so
        the per-step costs shrink when they decide latency; outputs are the same either way
        (any chunking of a stream equals its offline result)."""
        lagging = self.lagging()
        return max(self.load_chunk_frames, self.chunk_frames) if lagging else self.chunk_frames

    def search_threshold(self) -> float | None:
        """The score threshold for the frames a stream decodes now: `load_threshold` while
        the model lags, else None (the bundle's own). The decoders share the cores with the
        model, so a narrower search while it lags gives the model back time before every
        stream's latency grows; it costs a little accuracy only under such load, and a
        transcript heard then may differ from the offline one."""
        if self.load_threshold is None or not self.lagging():
            return None
        self.narrowed += 1
        return self.load_threshold


def backlog_step(waiting: int, chunk: int, most: int) -> int:
    """Frames of the next step when `waiting` frames (at least `chunk`) are there: the chunk
    times the largest power of two that fits, at most `most` rounded down to the chunk. Few
    step lengths mean few kernel shapes for the model to compile and cache (server/runner.py)."""
    n = chunk << ((waiting // chunk).bit_length() - 1)
    return min(n, max(chunk, most // chunk * chunk))


def backlog_steps(chunk: int, most: int) -> set[int]:
    """Every length `backlog_step` gives for this chunk and limit (for warm-up)."""
    return {backlog_step(n, chunk, most) for n in range(chunk, 2 * most + chunk, chunk)}


def one_blas_thread() -> threadpool_limits:
    """numpy's BLAS held to one thread (the process's programs, `harken serve` and
    `harken transcribe`, call it; a library would not change a process-wide setting): the
    punctuator's and the features' small products run on the event loop, and a second BLAS
    thread only spins against the model and the decoders on a busy server (a punctuator word
    cost 42 us on one thread, 555 us on two beside a busy core)."""
    return threadpool_limits(1, user_api="blas")


@asynccontextmanager
async def running_engine(
    config: ServerConfig, observer: DispatchObserver | None = None
) -> AsyncIterator[Engine]:
    """Load the bundle (off the event loop), start the dispatcher; stop and free on exit."""
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)  # process-wide, as torch allows
    punctuator = await asyncio.to_thread(punctuator_for, config)  # a broken one fails first
    dtype, why = resolve_dtype(config.dtype, config.device)
    log.info("model precision %s (%s)", dtype, why)
    adaptation = AdaptConfig(steps=config.adapt_steps, rate=config.adapt_rate)
    runner = await asyncio.to_thread(
        runner_for_bundle,
        config.bundle,
        config.device,
        dtype,
        config.speaker_adaptation,
        config.ensemble,
        adaptation,
    )
    # what a speaker's profile token names its network by
    network = await asyncio.to_thread(network_digest, Path(config.bundle) / "model.safetensors")
    if isinstance(runner, EnsembleRunner):
        shares = ", ".join(f"{w:.2f}" for w in runner.weights)
        log.info("ensemble of %d networks, shares of the mean %s", len(runner.runners), shares)
    if config.decoder == "beam":
        _log_language_model(Path(config.bundle))
    model = runner.model.config
    # the flags' settings over the bundle's own network's, when it is heard without its members
    search = config.search if config.ensemble else {**alone_search(config.bundle), **config.search}
    narrow = config.load_beam_threshold or None
    if config.decoder != "beam":
        narrow = None  # a greedy decoder has no search to narrow
    chunk_frames = frames(model, config.chunk_ms)
    load_chunk_frames = frames(model, min(config.load_chunk_ms, config.max_chunk_ms))
    # every batch size Batch Dispatch can make at the live chunk lengths, and the long-step
    # sizes at every length a session steps a backlog in, compiled before the first request
    live = (chunk_frames, max(chunk_frames, load_chunk_frames))
    max_chunk_frames = frames(model, config.max_chunk_ms)
    backlog = sorted(set().union(*(backlog_steps(c, max_chunk_frames) for c in live)))
    # a stream's last step holds less than a chunk
    cover = WarmShapes(live, config.max_batch, tuple(backlog), max(live) - 1, config.adapt_files)
    now, later = _warm_steps(runner, cover, config.warmup)
    started = time.perf_counter()
    await asyncio.to_thread(runner.prime)
    await asyncio.to_thread(runner.warm, now)
    log.info(
        "warm-up: %d step shapes in %.1f s before ready%s",
        len(now),
        time.perf_counter() - started,
        f", {len(later)} more in the background" if later else "",
    )
    dispatcher: BatchDispatcher[Chunk, F32] = BatchDispatcher(runner, config.dispatch, observer)
    processes: list[DecoderProcess] = []
    pool: DecoderPool | None = None
    warming: asyncio.Task[None] | None = None
    try:
        if config.decoder == "beam":
            # compile (or load) the beam search's kernels here once, so the decoder processes
            # load them from numba's cache instead of each compiling them at the same time
            await asyncio.to_thread(warm_up)
        if config.decoder_processes:
            processes = await asyncio.to_thread(
                start_processes,
                config.bundle,
                model,
                config.decoder,
                config.decoder_workers,
                search,
            )
            decoders: list[Decoder] = list(processes)
        else:
            shared = build_decoder(config.bundle, model, config.decoder, search)
            decoders = [shared] * config.decoder_workers
        pool = DecoderPool(decoders)
        settle_heap()  # the model thread and event loop pause less for collections too
        dispatcher.start()
        if later:
            warming = asyncio.create_task(
                _warm_when_idle(runner, later, lambda: dispatcher.active_streams == 0)
            )
        yield Engine(
            dispatcher=dispatcher,
            pool=pool,
            features=model.features,
            chunk_frames=chunk_frames,
            max_chunk_frames=max_chunk_frames,
            load_chunk_frames=load_chunk_frames,
            load_wait_s=config.load_wait_ms / 1000,
            load_threshold=narrow,
            max_samples=int(config.max_stream_s * model.features.sample_rate),
            max_file_samples=int(config.max_file_s * model.features.sample_rate),
            frame_seconds=model.frame_seconds,
            fit_input_s=adaptation.max_seconds,
            model_states=lambda: runner.streams,
            step_shapes=lambda: runner.shapes,
            fit_input=runner.fit_input,
            fit_profile=runner.fit_input,
            profiles=config.profiles,
            network=network,
            candidates=max(len(model.warp_factors), 1),
            punctuator=punctuator,
        )
    finally:
        gc.unfreeze()  # what the engine held can be collected again once it is gone
        if warming is not None:
            warming.cancel()
            with suppress(asyncio.CancelledError):
                await warming
        await dispatcher.stop()
        if pool is not None:
            pool.close()
        for process in processes:
            process.close()
        runner.close()


def punctuator_for(config: ServerConfig) -> Punctuator | None:
    """The bundle's punctuator unless the server was asked for plain words, saying at
    start which it is: written transcripts are on for REST and Realtime by default, and
    without it they are silently plain."""
    bundle = Path(config.bundle)
    if config.no_punctuation:
        log.info("written transcripts: off (--no-punctuation); every transcript is plain words")
        return None
    punctuator = load_punctuator(bundle)
    if punctuator is None:
        log.info(
            "written transcripts: none; %s has no %s, so every transcript is plain words",
            bundle,
            META,
        )
    else:
        log.info(
            "written transcripts: punctuation and capitals from %s (%d words, lookahead %d)",
            bundle / META,
            punctuator.config.vocab,
            punctuator.config.lookahead,
        )
    return punctuator


def _log_language_model(bundle: Path) -> None:
    """Say at load which LM the search reads, or that it reads none: a bundle without a
    decoder.json reads many more words wrong, and nothing else would tell."""
    try:
        doc = read_decoder_json(bundle)
    except FileNotFoundError:
        log.warning(
            "language model: none; %s has no %s, so the beam search hears the network alone "
            "(harken build-lm builds an LM into a bundle)",
            bundle,
            DECODER_JSON,
        )
        return
    except ValueError:
        return  # a broken decoder.json: building the decoder reports it, with its reason
    mixed = "".join(f", mixed with {m.get('lm')} at {m.get('weight')}" for m in doc.get("mix", []))
    log.info("language model: %s%s (%s)", doc.get("lm"), mixed, bundle / DECODER_JSON)


def frames(model: ModelConfig, ms: int) -> int:
    """Feature frames in `ms` of audio, rounded down to the time stride (at least one)."""
    stride = model.time_stride
    return max(stride, int(ms // model.features.hop_ms) // stride * stride)


def _warm_steps(
    runner: ModelRunner | EnsembleRunner, cover: WarmShapes, warmup: str
) -> tuple[list[WarmStep], list[WarmStep]]:
    """The steps to warm before ready and after, as `warmup` says (ServerConfig.warmup).
    `cover` is everything the server can step; a stream's own shapes are those of one
    stream with no backlog."""
    plan = runner.warm_plan(cover)
    if warmup == "all":
        return plan, []
    own = set(runner.warm_plan(dataclasses.replace(cover, max_streams=1, backlog=())))
    now = [s for s in plan if s in own]
    return now, [s for s in plan if s not in own] if warmup == "background" else []


async def _warm_when_idle(
    runner: ModelRunner | EnsembleRunner, steps: list[WarmStep], idle: Callable[[], bool]
) -> None:
    """`steps` one at a time on the model thread, each only while `idle()`: warm-up steps
    beside live streams took the model thread from them (10 streams from the moment of ready,
    on a 2-core Zen 3: p50 238 ms against 79 for a fully warmed server;
    experiments/loadtest/warmup), while a shape first met under load only costs its compile."""
    started = time.perf_counter()
    try:
        for step in steps:
            while not idle():
                await asyncio.sleep(IDLE_POLL_S)
            await runner.warm_later(step)
    except Exception:  # a shape that cannot step now fails its first real batch, with a reason
        log.exception("warm-up in the background stopped")
        return
    log.info("warm-up: %d more step shapes in %.1f s", len(steps), time.perf_counter() - started)
