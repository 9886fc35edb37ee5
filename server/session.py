"""One stream's life: audio in, features, Batch Dispatch, decoder, partials and finals.

    NEW --start--> STREAMING --feed*--> STREAMING --finish--> DONE
      any state --close / error--> CLOSED (frees the dispatcher stream and decoder state)

Transports (`/v1/stream`, `/vosk`, REST) drive a session and turn its typed errors into
their own wire format; the session knows nothing of sockets or HTTP.

What a stream is heard through besides the model's warps (a file's fitted transforms, a
speaker's profile) plugs in as a `StreamHook` (server/adaptation.py), called at fixed points:
each chunk, each step, after each feed, at close. The `Engine` it uses is server/engine.py's.

Endpointing (optional): when the model's best symbol has been the blank for `endpoint_ms`
after some speech, the segment ends: its decoder stream is finalised into a Final and a new
one starts. The acoustic model runs on without a break, so the audio of the next segment
sees the same recurrent state it would have seen without the endpoint.

Written transcripts (`Options.written`, with a bundle that has a punctuator): each segment's
partials and final go through its own `SegmentWriter` (server/written.py), which adds
punctuation and capitals and keeps the written stable text append-only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from models.features import StreamingFeaturizer
from models.input_adaptation import InputTransforms
from server.adaptation import AsIs, SpeakerProfiles, StreamHook, stream_hook
from server.audio import Resampler
from server.decoding import DecoderStream, HypothesisLike
from server.dispatch import DispatchError
from server.engine import Engine, backlog_step
from server.errors import (
    BadConfig,
    DecoderFailed,
    EmptyAudio,
    ModelFailed,
    OutOfOrder,
    SessionError,
    StreamTooLong,
)
from server.protocol import Alternative, Final, Partial, SpeakerProfile, Word
from server.runner import Chunk
from server.written import SegmentWriter

F32 = npt.NDArray[np.float32]
log = logging.getLogger("harken.server")
# a final with more words than this to read is written off the event loop (a few ms)
WRITE_ON_LOOP_WORDS = 50


class State(enum.Enum):
    NEW = "new"
    STREAMING = "streaming"
    DONE = "done"
    CLOSED = "closed"


@dataclass(frozen=True)
class Options:
    """What a client chose for its stream (validated by the protocol layer)."""

    sample_rate: int
    partials: bool = True
    n_best: int = 1
    word_timestamps: bool = True
    hotwords: tuple[str, ...] = ()
    endpoint_ms: int = 0  # trailing silence (blank frames) that ends a segment; 0: never
    alternative_words: bool = False  # the alternatives carry timed words too (Vosk's do)
    file: bool = False  # a recording (REST, `harken transcribe`): the file length limit applies
    # fit a profile of the speaker from the stream's own speech and hear the rest through it
    # (server/adaptation.py; why and what it buys: experiments/speaker.md)
    adapt_speaker: bool = False
    send_profile: bool = False  # hand each profile fitted to the client (SpeakerProfile)
    # partials and finals as written text: punctuation and capitals from the bundle's
    # punctuator (server/written.py); plain words where the engine has none
    written: bool = False
    # normalised hotword -> the client's written form of it ("iphone" -> "iPhone"), kept in
    # written text (server/hotwords.py)
    casing: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Timing:
    busy: float = 0.0  # seconds spent waiting for the model and decoder
    samples: int = 0  # client samples received, at the client's rate


@dataclass
class _Segment:
    """The part of the stream since the last endpoint, in model output frames."""

    start_s: float = 0.0  # where it starts in the stream
    skipped_s: float = 0.0  # leading silence the model never saw (the stream's first only)
    frames: int = 0  # output frames given to its decoder stream
    silence: int = 0  # trailing frames whose most probable symbol is the blank
    spoke: bool = False  # some frame's most probable symbol was not the blank

    @property
    def origin_s(self) -> float:
        """Where its first model frame sits in the stream."""
        return self.start_s + self.skipped_s

    def end_s(self, frame_seconds: float) -> float:
        """Where its last model frame so far ends in the stream: where the next one starts."""
        return self.origin_s + self.frames * frame_seconds

    def observe(self, log_probs: F32) -> None:
        """Account for the next output frames [t, V] (blank at index 0)."""
        speech = np.flatnonzero(log_probs.argmax(axis=1) != 0)
        if len(speech):
            self.spoke = True
            self.silence = len(log_probs) - 1 - int(speech[-1])
        else:
            self.silence += len(log_probs)
        self.frames += len(log_probs)


# what a session hands its transport while audio comes in
Update = Partial | Final | SpeakerProfile


@dataclass
class Session:
    engine: Engine
    options: Options
    state: State = State.NEW
    stream: int = 0
    timing: _Timing = field(default_factory=_Timing)
    _decoder: DecoderStream | None = None
    _featurizer: StreamingFeaturizer | None = None
    _resampler: Resampler | None = None
    _frames: F32 = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    _audio: list[F32] = field(default_factory=list)  # 16 kHz audio not yet featurized
    _audio_samples: int = 0
    _decoding: list[asyncio.Future[None]] = field(default_factory=list)
    # with partials on: log-probs stepped but not yet given to the decoder, which gets them
    # with the next partial request in one call (one round trip to a decoder process, not two)
    _undecoded: list[F32] = field(default_factory=list)
    _last_text: str = ""
    _segment: _Segment = field(default_factory=_Segment)
    _writer: SegmentWriter | None = None  # the segment's, with written transcripts
    # what the stream is heard through besides the warps (server/adaptation.py): a file's
    # fitted transforms (server/recording.py sets them before start), or a speaker's profile
    hook: StreamHook = field(default_factory=AsIs)
    _first: bool = True  # the next chunk is the first of a model stream
    # the client's own speaker profile, heard from the first chunk (server/profiles.py)
    profile: InitVar[InputTransforms | None] = None

    def __post_init__(self, profile: InputTransforms | None) -> None:
        if self.options.adapt_speaker or profile is not None:
            adapt, send = self.options.adapt_speaker, self.options.send_profile
            self.hook = stream_hook(self.engine, adapt, send, profile)

    async def start(self) -> None:
        """Open the dispatcher stream and the decoder stream."""
        self._expect(State.NEW, "start")
        engine = self.engine
        self.stream = engine.dispatcher.open_stream()
        self.state = State.STREAMING
        self._resampler = Resampler(self.options.sample_rate, engine.features.sample_rate)
        self._featurizer = StreamingFeaturizer(engine.features)
        self._frames = np.zeros((0, engine.features.n_bins), np.float32)
        self._decoder = await self._new_decoder()

    async def _new_decoder(self) -> DecoderStream:
        """A decoder stream for the next segment (and its writer, with written text)."""
        punctuator = self.engine.punctuator
        if self.options.written and punctuator is not None:
            self._writer = SegmentWriter(punctuator, self.options.casing)
        hotwords = tuple(h.lower() for h in self.options.hotwords)
        try:
            return await self.engine.pool.start(self.stream, hotwords)
        except ValueError as e:  # the decoder validates hotwords against its alphabet
            raise BadConfig(f"hotwords: {e}") from None
        except Exception as e:  # its process is gone and no new one would start, say
            raise DecoderFailed(f"the decoder could not start this stream: {e}") from e

    async def feed(self, samples: F32) -> list[Update]:
        """Take client-rate samples and run every full chunk. Returns, in order, a Final for
        each segment that ended (with endpointing on), then a Partial if the text changed,
        then the speaker's profile if one was fitted since (with `send_profile`)."""
        self._expect(State.STREAMING, "send audio")
        self._count(len(samples))
        self._add_frames(samples, last=False)
        updates: list[Update] = []
        stepped = await self._run_full_chunks(updates)
        if stepped and self.options.partials and (partial := await self._partial()):
            updates.append(partial)
        updates += self.hook.news()
        return updates

    async def finish(self) -> Final:
        """End of stream: flush the model and the decoder, return the final result."""
        self._expect(State.STREAMING, "finish")
        if self.timing.samples == 0:
            raise EmptyAudio(
                "the stream ended without any audio; send binary audio frames before eos"
            )
        self._add_frames(np.zeros(0, np.float32), last=True)
        await self._run_full_chunks(None)
        tail, self._frames = self._frames, self._frames[:0]
        await self._step(tail, last=True)
        hypotheses = await self._decode("finalize")
        final = await self._written(self._final(hypotheses, self.duration))
        self.state = State.DONE
        return final

    async def _end_segment(self) -> Final:
        """Endpoint: finalise this segment's decoder stream and start the next one."""
        hypotheses = await self._decode("finalize")
        end = self._segment.end_s(self.engine.frame_seconds)
        final = await self._written(self._final(hypotheses, end))
        self._segment = _Segment(start_s=end)
        self._decoder = await self._new_decoder()
        self._last_text = ""
        return final

    async def reset(self) -> Final:
        """End the utterance here as the end of stream would (the model flushed, the
        decoder finalised), then go on listening with a fresh model state and decoder:
        Vosk's `reset`. The audio front end runs on, so times stay stream times."""
        self._expect(State.STREAMING, "reset")
        self._featurize()  # all the audio received so far belongs to the utterance ending
        await self._run_full_chunks(None)
        tail, self._frames = self._frames, self._frames[:0]
        await self._step(tail, last=True)
        end = self._segment.end_s(self.engine.frame_seconds)
        final = await self._written(self._final(await self._decode("finalize"), end))
        self.engine.dispatcher.close_stream(self.stream)
        self.stream = self.engine.dispatcher.open_stream()
        self._first = True  # the new model stream needs what the hook gives a first chunk
        self._segment = _Segment(start_s=end)
        self._decoder = await self._new_decoder()
        self._last_text = ""
        return final

    def _at_endpoint(self) -> bool:
        seg, ms = self._segment, self.options.endpoint_ms
        return ms > 0 and seg.spoke and seg.silence * self.engine.frame_seconds * 1000 >= ms

    def close(self) -> None:
        """Free everything the stream holds; safe in any state, and more than once."""
        if self.state in (State.STREAMING, State.DONE):
            self.engine.dispatcher.close_stream(self.stream)
        self.hook.close()
        for future in self._decoding:
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the stream is gone, nobody else will look
            future.cancel()
        self._decoding.clear()
        self._undecoded.clear()
        self._decoder = None
        self.state = State.CLOSED

    @property
    def profile_waits(self) -> list[float]:
        """Seconds from each of the stream's profile fits falling due to its being heard."""
        return list(self.hook.waits) if isinstance(self.hook, SpeakerProfiles) else []

    @property
    def duration(self) -> float:
        return self.timing.samples / self.options.sample_rate

    # -- audio to model steps -------------------------------------------------------------

    def _count(self, n: int) -> None:
        self.timing.samples += n
        engine, rate = self.engine, self.options.sample_rate
        most = engine.max_file_samples if self.options.file else engine.max_samples
        if self.timing.samples > most * rate // engine.features.sample_rate:
            raise too_long(most / engine.features.sample_rate, self.options.file)

    def _add_frames(self, samples: F32, last: bool) -> None:
        """Resample now; featurize only once a step's worth of frames is there (or at the
        end): a client frame is often 20-100 ms, and the spectrogram costs mostly per call,
        not per frame. Any split of the audio gives the same frames."""
        assert self._resampler is not None and self._featurizer is not None
        audio = self._resampler.push(samples, last=last)
        if len(audio):
            self._audio.append(audio)
            self._audio_samples += len(audio)
        wanted = self.engine.step_frames() - len(self._frames)
        if last or self._featurizer.frames_after(self._audio_samples) >= wanted:
            self._featurize()

    def _featurize(self) -> None:
        """Turn the audio waiting for the featurizer into frames for the model."""
        assert self._featurizer is not None
        pending = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
        self._audio, self._audio_samples = [], 0
        frames = self._featurizer.push(pending)
        if len(frames):
            if not self._segment.frames and not self._segment.start_s:  # the stream's first
                self._segment.skipped_s = self._featurizer.skipped_s
            self._frames = np.concatenate([self._frames, frames])

    async def _run_full_chunks(self, finals: list[Update] | None) -> bool:
        """Send whole chunks, a backlog in steps of up to `max_chunk_frames`; with a list
        for `finals`, end a segment where an endpoint is reached and add its Final.
        A backlog steps in `backlog_step`s."""
        chunk, stepped = self.engine.step_frames(), False
        while len(self._frames) >= chunk:
            n = backlog_step(len(self._frames), chunk, self.engine.max_chunk_frames)
            frames, self._frames = self._frames[:n], self._frames[n:]
            await self._step(frames, last=False)
            stepped = True
            if finals is not None and self._at_endpoint():
                finals.append(await self._end_segment())
        return stepped

    async def _step(self, frames: F32, last: bool) -> None:
        """One model step. With partials on, its log-probs wait for the partial request that
        follows the step and go with it (one decoder call for both); otherwise `advance` is
        queued, not awaited, so it overlaps the stream's next step. Errors of queued work
        surface at the next `_decode`."""
        began = time.perf_counter()
        heard, self._first = self.hook.chunk(self._first), False
        chunk = Chunk(frames, heard.transforms, heard.profile)
        try:
            log_probs = await self.engine.dispatcher.submit(self.stream, chunk, last)
        except DispatchError as e:
            raise ModelFailed(str(e)) from e
        except Exception as e:  # the runner's own error, shared by its whole batch
            raise ModelFailed(f"the model failed on this stream's batch: {e}") from e
        finally:
            self.timing.busy += time.perf_counter() - began
        self._segment.observe(log_probs)
        self._undecoded.append(log_probs)
        if last or not self.options.partials:  # no partial request follows to carry them
            self._queue_advance()
        if not last:
            self.hook.stepped(frames)

    def _queue_advance(self) -> None:
        """Queue the undecoded log-probs on the stream's decoder worker without waiting for
        it, so decoding overlaps the stream's next model step."""
        log_probs = self._take_undecoded()
        if log_probs is not None:
            decoder = self._require_decoder()
            threshold = self.engine.search_threshold()
            call = self.engine.pool.call(self.stream, decoder, "advance", log_probs, threshold)
            self._decoding.append(call)

    def _take_undecoded(self) -> F32 | None:
        """The stepped log-probs the decoder has not had yet, as one array (None: none)."""
        if not self._undecoded:
            return None
        log_probs, self._undecoded = np.concatenate(self._undecoded), []
        return log_probs

    # -- decoding -----------------------------------------------------------------------

    def _require_decoder(self) -> DecoderStream:
        assert self._decoder is not None, "session not started"
        return self._decoder

    async def _decode(self, op: str, *args: Any) -> Any:
        """Call the stream's decoder (`op`: "partial", "advance_and_partial" or "finalize")
        on its worker, after the advances queued before it, and surface any error those
        raised."""
        self._queue_advance()  # everything stepped so far comes before this call
        began = time.perf_counter()
        try:
            result = await self.engine.pool.call(self.stream, self._require_decoder(), op, *args)
            pending, self._decoding = self._decoding, []
            await asyncio.gather(*pending)  # done already: the worker runs in order
        except Exception as e:
            raise DecoderFailed(f"the decoder failed on this stream: {e}") from e
        finally:
            self.timing.busy += time.perf_counter() - began
        return result

    async def _partial(self) -> Partial | None:
        log_probs = self._take_undecoded()
        if log_probs is not None:
            threshold = self.engine.search_threshold()
            hyp: HypothesisLike = await self._decode("advance_and_partial", log_probs, threshold)
        else:
            hyp = await self._decode("partial")
        if hyp.text == self._last_text:
            return None
        self._last_text = hyp.text
        partial = Partial(text=hyp.text, stable=hyp.stable_text)
        return partial if self._writer is None else self._writer.partial(partial)

    def _final(self, hypotheses: Sequence[HypothesisLike], end_s: float) -> Final:
        """The segment's result; it ends at `end_s` in the stream (the end of its audio)."""
        best = hypotheses[0] if hypotheses else None
        start, origin = self._segment.start_s, self._segment.origin_s
        words = [] if best is None or not self.options.word_timestamps else _words(best, origin)
        alternatives = [self._alternative(h, origin) for h in hypotheses[1 : self.options.n_best]]
        return Final(
            text=best.text if best else "",
            score=best.score if best else 0.0,
            words=words,
            alternatives=alternatives,
            start=round(start, 3),
            # from the rounded times, so that a segment's start plus duration is the next start
            duration=round(max(round(end_s, 3) - round(start, 3), 0.0), 3),
        )

    async def _written(self, final: Final) -> Final:
        """The segment's final as written text, where the stream asked for it; a long one
        off the event loop (a file's: some 0.1 ms a word)."""
        writer = self._writer
        if writer is None:
            return final
        if writer.unread(final) > WRITE_ON_LOOP_WORDS:
            return await asyncio.to_thread(writer.final, final)
        return writer.final(final)

    def _alternative(self, hyp: HypothesisLike, origin: float) -> Alternative:
        timed = self.options.alternative_words and self.options.word_timestamps
        return Alternative(
            text=hyp.text, score=hyp.score, words=_words(hyp, origin) if timed else None
        )

    def _expect(self, state: State, action: str) -> None:
        if self.state is not state:
            raise OutOfOrder(f"cannot {action} in state {self.state.value!r}")


def too_long(seconds: float, file: bool) -> StreamTooLong:
    """The refusal of audio past the limit of a live stream or a file, naming the flag (of
    `harken serve`, and of `harken transcribe` for files) and variable that raise it."""
    what, flag = ("file", "max_file_s") if file else ("stream", "max_stream_s")
    return StreamTooLong(
        f"the {what} is longer than the {seconds:g} s allowed; "
        f"--{flag.replace('_', '-')} (or HARKEN_{flag.upper()}) raises the limit"
    )


def _words(hyp: HypothesisLike, offset: float) -> list[Word]:
    """The hypothesis' words, timed from the start of the stream (`offset`: its segment's)."""
    return [
        Word(
            word=w.word,
            start=round(offset + w.start, 3),
            end=round(offset + w.end, 3),
            conf=round(w.conf, 3),
        )
        for w in hyp.words
    ]


__all__ = [
    "Engine",
    "Options",
    "Session",
    "SessionError",
    "State",
    "Update",
    "too_long",
]
