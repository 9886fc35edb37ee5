"""A recording (an uploaded file, a file on disk) heard through a session, a block at a time.

A file goes through the same Session and Batch Dispatch as a live stream, in steps of up to
`max_chunk_frames`, and it is decoded in blocks of about a minute as those steps take them
(`server/audio.py` `decode_blocks`). So a file holds one block of samples and one step of
features at a time, never the whole; what grows with its length is its transcript (an hour
of the default peaked 93 MB above a minute, where holding 10 minutes whole took 0.9 GB
more: RESULTS.md).
The longest file is `--max-file-s`, of `harken serve` and `harken transcribe` alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from pathlib import Path

import numpy as np

from models.features import StreamingFeaturizer
from models.input_adaptation import InputTransforms
from server.adaptation import FileTransforms
from server.audio import F32, AudioError, FileBlocks
from server.engine import Engine
from server.errors import BadAudio, BadConfig, EmptyAudio, ModelFailed, UnsupportedFormat
from server.hotwords import NO_HOTWORDS, Hotwords
from server.protocol import Final
from server.session import Options, Session, Update, too_long


async def file_blocks(source: bytes | Path, engine: Engine) -> AsyncGenerator[F32, None]:
    """A file as mono float32 blocks at the model's rate, each decoded off the event loop;
    its audio errors as the transports' errors. Close it (`contextlib.aclosing`), so that
    an ffmpeg decoding it ends as soon as it is no longer read."""
    rate = engine.features.sample_rate
    limit = engine.max_file_samples / rate
    blocks = FileBlocks(source, rate, limit)
    try:
        while (block := await asyncio.to_thread(blocks.read)) is not None:
            yield block
    except AudioError as e:
        if e.code == "too_long":
            raise too_long(limit, file=True) from None
        raise (UnsupportedFormat if e.code == "unsupported_format" else BadAudio)(str(e)) from None
    finally:
        # on a thread, after a read still under way there (a request cancelled mid-read)
        asyncio.get_running_loop().run_in_executor(None, blocks.close)


async def opened(blocks: AsyncGenerator[F32, None]) -> AsyncGenerator[F32, None]:
    """`blocks` with its first block read now, so that a file that cannot be decoded at all
    is refused before anything is sent; EmptyAudio when it holds no samples."""
    try:
        first = await anext(blocks, None)
    except BaseException:
        await blocks.aclose()
        raise
    if first is None:
        await blocks.aclose()
        raise EmptyAudio("the audio holds no samples")
    return _chain([first], blocks)


async def hear(
    session: Session, blocks: AsyncIterable[F32], adapt_input: bool = False
) -> AsyncIterator[Update]:
    """A new `session`'s updates as it hears a recording's blocks (mono float32 at the
    model's rate, in order) in steps of up to `max_chunk_frames`, its Final last; with
    `adapt_input`, through input transforms fitted to the recording's first seconds
    (`models/input_adaptation.py`). The session is closed at the end."""
    engine, source = session.engine, aiter(blocks)
    try:
        head: list[F32] = []
        if adapt_input:
            head, feats = await _head(engine, source)
            session.hook = FileTransforms(await fit_recording(engine, feats))
        await session.start()
        piece = engine.max_chunk_frames * engine.features.hop
        async for block in _chain(head, source):
            for lo in range(0, len(block), piece):
                for update in await session.feed(block[lo : lo + piece]):
                    yield update
        if session.timing.samples == 0:
            raise EmptyAudio("the audio holds no samples")
        yield await session.finish()
    finally:
        session.close()


async def transcribe(
    engine: Engine,
    audio: F32 | AsyncIterable[F32],
    adapt_input: bool = False,
    profile: InputTransforms | None = None,
    hotwords: Hotwords = NO_HOTWORDS,
    written: bool = False,
) -> tuple[Session, Final]:
    """A recording through a session (`hear`), whole (mono float32 at the model's rate) or
    as its blocks; with `adapt_input` heard through input transforms fitted to it, with a
    speaker's `profile` (one or the other) through that; with `written`, its transcript
    written with punctuation and capitals where the engine can (server/written.py)."""
    if isinstance(audio, np.ndarray):
        check_recording(engine, audio)
        audio = _chain([audio])
    options = Options(
        sample_rate=engine.features.sample_rate,
        partials=False,
        hotwords=hotwords.phrases,
        casing=hotwords.casing,
        written=written,
        file=True,
    )
    session = Session(engine, options, profile=profile)
    updates = [update async for update in hear(session, audio, adapt_input)]
    final = updates[-1]
    assert isinstance(final, Final)
    return session, final


def check_recording(engine: Engine, audio: F32) -> None:
    """Refuse a whole recording (mono float32 at the model's rate) that is empty or too
    long, before any of it is decoded."""
    if len(audio) == 0:
        raise EmptyAudio("the audio holds no samples")
    if len(audio) > engine.max_file_samples:
        raise too_long(engine.max_file_samples / engine.features.sample_rate, file=True)


async def fit_recording(engine: Engine, feats: F32) -> InputTransforms:
    """Input transforms of a recording from its first raw frames [T, F] (those its session
    sends: the featurizer skips the same leading silence)."""
    if engine.fit_input is None:
        raise BadConfig("this server cannot adapt to a file's input (no model to fit with)")
    if len(feats) == 0:
        raise EmptyAudio("the audio is too short to adapt to: not one frame of features")
    try:
        return await engine.fit_input(feats)
    except Exception as e:
        raise ModelFailed(f"fitting the input adaptation failed: {e}") from e


async def _head(engine: Engine, blocks: AsyncIterator[F32]) -> tuple[list[F32], F32]:
    """The blocks read until the input fit has the frames it reads (or the recording
    ended), and those frames."""
    featurizer = StreamingFeaturizer(engine.features)
    wanted = max(1, int(engine.fit_input_s * 1000 / engine.features.hop_ms))
    head: list[F32] = []
    frames = [np.zeros((0, engine.features.n_bins), np.float32)]
    have = 0
    while have < wanted and (block := await anext(blocks, None)) is not None:
        head.append(block)
        frames.append(await asyncio.to_thread(featurizer.push, block))
        have += len(frames[-1])
    return head, np.concatenate(frames)[:wanted]


async def _chain(
    first: list[F32], rest: AsyncIterable[F32] | None = None
) -> AsyncGenerator[F32, None]:
    """The blocks of `first`, then those of `rest` (closed at the end when it can be)."""
    try:
        for block in first:
            yield block
        if rest is not None:
            async for block in rest:
                yield block
    finally:
        if isinstance(rest, AsyncGenerator):
            await rest.aclose()
