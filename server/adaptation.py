"""What a stream is heard through besides the model's own warps, plugged into its session.

A file may be heard through input transforms fitted to its first seconds (`--adapt-files`,
`adapt_input`: models/input_adaptation.py); a live stream may fit its speaker's profile from
its own speech as it goes, or bring one from an earlier stream (server/profiles.py). Either
is a `StreamHook` that the session calls at four fixed points: what a model stream's next
chunk carries, which frames a step heard, what to tell the client after a feed, and the end.
So `Session` stays the state machine of one stream, and the runner (server/runner.py) keeps
what a chunk carried for the rest of its model stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from models.config import FeatureConfig
from models.input_adaptation import AdaptConfig, InputTransforms, ProfileSchedule
from server.profiles import encode_profile
from server.protocol import SpeakerProfile

F32 = npt.NDArray[np.float32]
log = logging.getLogger("harken.server")


class Heard(NamedTuple):
    """What a chunk carries to the runner besides its frames (server/runner.py `Chunk`)."""

    transforms: InputTransforms | None = None  # a file's: with a model stream's first chunk
    profile: InputTransforms | None = None  # a speaker's: with any chunk, from then on


class StreamHook(Protocol):
    """The points at which a session lets its stream's adaptation act."""

    def chunk(self, first: bool) -> Heard:
        """What the next chunk carries (`first`: the first of a model stream)."""
        ...

    def stepped(self, frames: F32) -> None:
        """The raw frames [T, F] a step that was not the stream's last heard."""
        ...

    def news(self) -> list[SpeakerProfile]:
        """What the client is told after a feed."""
        ...

    def close(self) -> None:
        """The stream is gone: stop what is under way."""
        ...


class AsIs:
    """A stream heard as it is (the default)."""

    def chunk(self, first: bool) -> Heard:
        return Heard()

    def stepped(self, frames: F32) -> None:
        pass

    def news(self) -> list[SpeakerProfile]:
        return []

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class FileTransforms(AsIs):
    """A recording heard through the transforms fitted to its start (server/recording.py);
    otherwise as it is."""

    transforms: InputTransforms

    def chunk(self, first: bool) -> Heard:
        return Heard(transforms=self.transforms) if first else Heard()


@dataclass
class ProfileFits:
    """The speakers' fits a server has under way, all on the model runner's one fit thread.

    A stream's first fit buys most of what a profile gives, for a fraction of the thread's
    time that all its refits take; taken first come, first served, a few fresh speakers a
    minute would queue their refits ahead of the next speakers' first fits
    (experiments/speaker.md). So a refit starts only while no other fit is under way: new
    speakers are learnt first, and the refits take the thread's slack."""

    pending: int = 0  # fits started and not finished (or dropped)

    def start(self, fit: Awaitable[InputTransforms]) -> asyncio.Future[InputTransforms]:
        """The fit as a future, counted until it is done."""
        future = asyncio.ensure_future(fit)
        self.pending += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: asyncio.Future[InputTransforms]) -> None:
        self.pending -= 1


class Fitting(Protocol):
    """What a speaker's profile needs of the engine (server/engine.py `Engine`); read at
    each fit, so a test may swap `fit_profile`."""

    features: FeatureConfig
    # fits a speaker's profile from a stream's raw frames; None: streams cannot adapt
    fit_profile: Callable[[F32, AdaptConfig], Awaitable[InputTransforms]] | None
    profiles: ProfileSchedule
    profile_fits: ProfileFits
    network: bytes

    def frame_s(self, frames: int) -> float: ...


@dataclass
class SpeakerProfiles:
    """A stream's speaker profile: the client's own (`profile`, never refitted), or one fitted
    from the stream's stepped frames (`fit`: `Options.adapt_speaker`) when the engine's
    schedule says, on its fit thread; each new one goes with the next chunk, is kept by the
    runner, and is handed to the client with `send` (a SpeakerProfile token)."""

    engine: Fitting
    fit: bool = False
    send: bool = False
    profile: InputTransforms | None = None
    frames: list[F32] = field(default_factory=list)
    heard: int = 0  # frames kept for fitting
    fitted_on: int = 0  # frames the current profile was fitted on (0: none yet)
    fitting_on: int = 0  # frames the fit under way reads
    fitting: asyncio.Future[InputTransforms] | None = None
    due_at: float = 0.0  # when the next fit fell due (perf_counter; 0: none is due)
    waits: list[float] = field(default_factory=list)  # due to heard, per profile the model got
    unsent: bool = False  # the runner has not had the latest
    unannounced: bool = False  # nor has the client
    finished: bool = False  # no further fit: the last was due, one failed, or the client's

    def __post_init__(self) -> None:
        if self.profile is not None:  # the client's own: sent first, and not fitted again
            self.unsent = self.finished = True

    def chunk(self, first: bool) -> Heard:
        """A fit that has finished gives the stream its profile, sent with this chunk (and
        with the first chunk of a new model stream: after a reset the speaker is the same)."""
        self._take()
        send = self.profile is not None and (self.unsent or first)
        self.unsent = False
        return Heard(profile=self.profile if send else None)

    def stepped(self, frames: F32) -> None:
        """Keep the stepped frames the profile is fitted on; start a fit when one is due."""
        engine = self.engine
        if not self.fit or engine.fit_profile is None or self.finished:
            return
        most = int(engine.profiles.max_s * 1000 / engine.features.hop_ms)
        if self.heard < most:
            self.frames.append(frames[: most - self.heard])
            self.heard += len(self.frames[-1])
        if self.fitting is not None or not engine.profiles.due(
            engine.frame_s(self.fitted_on), engine.frame_s(self.heard)
        ):
            return
        if not self.due_at:
            self.due_at = time.perf_counter()
        if self.fitted_on and engine.profile_fits.pending:
            return  # a refit waits until no fit is under way (ProfileFits); next chunk, again
        config = engine.profiles.config(first=not self.fitted_on)
        fit = engine.fit_profile(np.concatenate(self.frames), config)
        self.fitting, self.fitting_on = engine.profile_fits.start(fit), self.heard

    def news(self) -> list[SpeakerProfile]:
        """The profile the runner was last sent, once, as a token (with `send`)."""
        if not self.unannounced or self.profile is None:
            return []
        self.unannounced = False
        if not self.send:
            return []
        token = encode_profile(self.profile, self.engine.network)
        seconds = round(self.engine.frame_s(self.fitted_on), 2)
        return [SpeakerProfile(profile=token, seconds=seconds)]

    def close(self) -> None:
        if self.fitting is not None:
            if self.fitting.done() and not self.fitting.cancelled():
                self.fitting.exception()  # retrieved: the stream is gone, nobody else will look
            self.fitting.cancel()
            self.fitting = None
        self.frames.clear()

    def _take(self) -> None:
        """A fit that has finished becomes the profile; one that failed leaves the stream
        as it was: it is heard without a (new) profile."""
        if self.fitting is None or not self.fitting.done():
            return
        fitting, self.fitting = self.fitting, None
        error = None if fitting.cancelled() else fitting.exception()
        if fitting.cancelled() or error is not None:
            self.finished = True
            log.warning("a stream's speaker profile could not be fitted: %s", error)
            return
        self.profile, self.fitted_on = fitting.result(), self.fitting_on
        self.unsent = self.unannounced = True
        self.waits.append(time.perf_counter() - self.due_at)
        self.due_at = 0.0
        if not self.engine.profiles.due(self.engine.frame_s(self.fitted_on), float("inf")):
            self.finished = True
            self.frames.clear()  # free them


def stream_hook(
    engine: Fitting, adapt_speaker: bool, send_profile: bool, profile: InputTransforms | None
) -> StreamHook:
    """A live stream's hook: its speaker's profile (the client's own, or fitted as it goes
    with `adapt_speaker`), or none."""
    if adapt_speaker or profile is not None:
        return SpeakerProfiles(engine, fit=adapt_speaker, send=send_profile, profile=profile)
    return AsIs()
