"""`/v1/realtime?intent=transcription`: OpenAI's Realtime API for transcription, so its
clients (the `openai` package's `client.realtime.connect`, gateways that speak it) work
unchanged. Events and fields: server/realtime_protocol.py; what is served: docs/realtime.md.

client                                   server
                                         <- session.created
session.update {session: {type:
  "transcription", audio.input, include}} <- session.updated
input_audio_buffer.append {audio}*   ->  <- input_audio_buffer.speech_started    (server_vad)
                                         <- ...input_audio_transcription.delta*  (stable words)
  (server_vad: silence ends the turn)    <- input_audio_buffer.speech_stopped
input_audio_buffer.commit            ->  <- input_audio_buffer.committed {item_id, previous_item_id}
  (or the turn's end, above)             <- ...delta (the rest), ...completed {transcript}
input_audio_buffer.clear             ->  <- input_audio_buffer.cleared
a bad event                              <- error {error: {type, code, message, param,
                                            event_id}}; the session goes on
the model or decoder failing             <- ...input_audio_transcription.failed; the next
                                            item starts afresh
a limit (length, idle, frame, reader)    <- error, then the close code /v1/stream closes with

A connection runs one Session (server/session.py) at a time, started when audio first needs
it. With server_vad its endpointing ends each turn (a segment) and the Session runs on; a
commit finishes it as /v1/stream's eos does (the resampler's tail and all), and a clear
drops it, so the next audio starts a new one: a committed item reads exactly as its audio
sent alone as a stream. The deltas of an item are the words its partials call stable, which
later audio cannot change, then what the final adds: they add up to the completed
transcript exactly, and they come while the user speaks, before the commit. A session.update
that changes how audio is heard (format, prompt, keywords, turn detection) ends the item
under way as a commit would, then starts a Session with the new settings. Transcripts are
written text, as OpenAI's are, where the bundle has a punctuator (server/written.py): its
stable prefix only grows, so the deltas stay append-only.
"""

from __future__ import annotations

import base64
import binascii
import math
import time
from dataclasses import dataclass

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from server.audio import F32
from server.errors import (
    BadAudio,
    BadConfig,
    DecoderFailed,
    ModelFailed,
    SessionError,
    Unsupported,
)
from server.g711 import decode_g711
from server.hotwords import NO_HOTWORDS, Hotwords, merged, normalise_hotwords, prompt_hotwords
from server.openai_api import served_model
from server.protocol import Final, Partial
from server.realtime_protocol import (
    Append,
    Cleared,
    ClientEvent,
    Commit,
    Committed,
    Completed,
    Delta,
    DurationUsage,
    ErrorBody,
    ErrorEvent,
    EventError,
    Failed,
    G711Format,
    LogProb,
    ServerEvent,
    SessionCreated,
    SessionUpdate,
    SessionUpdated,
    Settings,
    SpeechStarted,
    SpeechStopped,
    Transcription,
    new_id,
    parse_event,
)
from server.session import Options, Session
from server.transport import (
    Resources,
    audio_frame,
    authorize,
    close_with_error,
    log,
    observe_profiles,
    receive,
    resources,
)
from server.written import tokens as written_tokens
from server.ws_frames import bound_sends, explain_refusals

router = APIRouter()
MAX_HOTWORDS = 100  # as many as a /v1/stream config's hotwords
# word confidences come rounded to 3 decimals (server/session.py): a logprob is the log of
# at least half the last digit, so a word rounded to 0 stays finite
CONF_FLOOR = 5e-4
_PROMPT = "session.audio.input.transcription.prompt"
_KEYWORDS = "session.audio.input.transcription.keywords"


@router.websocket("/v1/realtime")
async def realtime(ws: WebSocket) -> None:
    res = resources(ws)
    explain_refusals(ws, error_event)
    bound_sends(ws, res.config.send_timeout_s)
    await ws.accept()
    try:
        authorize(ws, res.config.auth_tokens)
        _check_intent(ws.query_params.get("intent"))
        with res.slots.hold():
            await _Connection(ws, res).serve()
            res.metrics.streams.labels("realtime").inc()  # counted before its slot is free
    except SessionError as e:
        await close_with_error(ws, e, res.metrics, render=error_event)


def error_event(error: SessionError) -> str:
    """OpenAI's `error` event for an error that ends the connection."""
    body = ErrorBody(type=error.openai_type, code=error.code, message=error.message)
    return ErrorEvent(error=body).model_dump_json()


def _check_intent(intent: str | None) -> None:
    if intent not in (None, "transcription"):
        raise Unsupported(
            f"intent={intent!r} is not served: this server serves OpenAI's Realtime "
            "transcription sessions only; connect with ?intent=transcription"
        )


@dataclass
class _Item:
    """The turn that the input buffer's audio is becoming."""

    start_ms: float  # where its audio starts in the connection's audio
    id: str | None = None  # given with its first event
    audio: bool = False  # audio was appended to it
    spoke: bool = False  # speech_started was sent for it
    sent: str = ""  # its transcript so far, as deltas


class _Connection:
    """One client's transcription session: its settings, its Session, the item under way."""

    def __init__(self, ws: WebSocket, res: Resources) -> None:
        self.ws, self.res = ws, res
        self.id = new_id("sess")
        self.model = served_model(res.config.bundle).id  # the name a session reports
        self.settings = Settings()
        self.hotwords = NO_HOTWORDS  # the prompt's and keywords' phrases
        self.session: Session | None = None  # started when audio first needs it
        self.origin_ms = 0.0  # where the Session's time 0 is in the connection's audio
        self.heard_ms = 0.0  # the connection's audio so far
        self.item = _Item(0.0)
        self.previous: str | None = None  # the last item committed

    async def serve(self) -> None:
        """Events until the client leaves; raises the SessionError that ends it early."""
        await self._send(SessionCreated(session=self.settings.session(self.id, self.model)))
        try:
            while True:
                await self._take(await receive(self.ws, self.res.config.idle_timeout_s))
        except WebSocketDisconnect:
            log.info("client left /v1/realtime; its resources are freed")
        finally:
            if self.session is not None:
                self._close(self.session)

    async def _take(self, message: bytes | str) -> None:
        """One client message, its errors answered: a bad event gets an `error` event, a
        failed model or decoder fails the item; either way the session goes on."""
        try:
            if isinstance(message, bytes):
                raise EventError(
                    "bad_message",
                    "audio goes in input_audio_buffer.append events, base64 in JSON text; "
                    "binary frames are not part of OpenAI's Realtime protocol",
                )
            await self._handle(parse_event(message))
        except EventError as e:
            await self._error(e)
        except (ModelFailed, DecoderFailed) as e:
            await self._failed(e)

    async def _handle(self, event: ClientEvent) -> None:
        if isinstance(event, SessionUpdate):
            await self._update(event)
        elif isinstance(event, Append):
            await self._append(event)
        elif isinstance(event, Commit):
            await self._commit(event.event_id)
        else:
            await self._clear()

    # -- session.update ------------------------------------------------------------------

    async def _update(self, event: SessionUpdate) -> None:
        settings = self.settings.updated(event.session)
        hotwords, refused = _hotwords(settings.transcription, event.event_id)
        if self._options(settings, hotwords) != self._options(self.settings, self.hotwords):
            new = await self._start(settings, hotwords, event.event_id)
            try:
                await self._end_session()
            except BaseException:
                self._close(new)
                raise
            self.session, self.origin_ms = new, self.heard_ms
        self.settings, self.hotwords = settings, hotwords
        if event.type == "transcription_session.update":  # a beta client: the beta's answer
            beta = settings.beta_session(self.id, self.model)
            await self._send(SessionUpdated(type="transcription_session.updated", session=beta))
        else:
            await self._send(SessionUpdated(session=settings.session(self.id, self.model)))
        for error in refused:  # the session goes on without them, as /v1/stream's warnings say
            await self._error(error)

    async def _error(self, error: EventError) -> None:
        """An `error` event for a client event the session could not take (or not all of)."""
        self.res.metrics.errors.labels(error.code).inc()
        body = ErrorBody(
            type="invalid_request_error",
            code=error.code,
            message=error.message,
            param=error.param,
            event_id=error.event_id,
        )
        await self._send(ErrorEvent(error=body))

    def _options(self, settings: Settings, hotwords: Hotwords) -> Options:
        vad = settings.turn_detection
        return Options(
            sample_rate=settings.rate,
            hotwords=hotwords.phrases,
            casing=hotwords.casing,
            written=True,  # OpenAI's transcripts are written text
            endpoint_ms=0 if vad is None else vad.silence_duration_ms or 0,
            adapt_speaker=self.res.config.adapt_speakers,
        )

    async def _start(self, settings: Settings, hotwords: Hotwords, event_id: str | None) -> Session:
        session = Session(self.res.engine, self._options(settings, hotwords))
        try:
            await session.start()
        except BadConfig as e:  # the decoder refused a hotword
            session.close()
            raise EventError("bad_config", e.message, _PROMPT, event_id) from None
        except BaseException:
            session.close()
            raise
        return session

    async def _end_session(self, quiet: bool = True) -> None:
        """Finish and close the Session: audio in the buffer ends its item, as a commit
        (with `quiet`, an item with nothing said and nothing sent goes unannounced)."""
        session, self.session = self.session, None
        if session is None:
            return
        try:
            if self.item.audio:
                began = time.perf_counter()
                await self._complete(await session.finish(), began, by_vad=False, quiet=quiet)
        finally:
            self._close(session)

    def _close(self, session: Session) -> None:
        observe_profiles(self.res, session)
        if session.duration > 0:
            self.res.metrics.real_time_factor.observe(session.timing.busy / session.duration)
        session.close()

    # -- the input audio buffer ------------------------------------------------------------

    async def _append(self, event: Append) -> None:
        samples = self._samples(event)
        if not len(samples):
            return
        if self.session is None:
            self.session = await self._start(self.settings, self.hotwords, event.event_id)
            self.origin_ms = self.heard_ms
        received = time.perf_counter()
        self.heard_ms += 1000 * len(samples) / self.settings.rate
        for update in await self.session.feed(samples):
            if isinstance(update, Final):  # silence after speech ended a turn
                await self._complete(update, received, by_vad=True)
            elif isinstance(update, Partial):
                await self._progress(update)
        self.item.audio = True

    def _samples(self, event: Append) -> F32:
        """The event's audio as float32 samples at the session's rate."""
        try:
            data = base64.b64decode(event.audio, validate=True)
        except (binascii.Error, ValueError) as e:
            raise EventError(
                "bad_audio", f"audio is not base64: {e}", "audio", event.event_id
            ) from None
        if isinstance(self.settings.format, G711Format):
            return decode_g711(data, self.settings.format.type)
        try:
            return audio_frame(data, "pcm_s16le")
        except BadAudio as e:
            raise EventError("bad_audio", f"audio: {e.message}", "audio", event.event_id) from None

    async def _commit(self, event_id: str | None) -> None:
        if self.session is None or not self.item.audio:
            raise EventError(
                "input_audio_buffer_commit_empty",
                "the input audio buffer holds no audio to commit; send "
                "input_audio_buffer.append events first",
                None,
                event_id,
            )
        await self._end_session(quiet=False)

    async def _clear(self) -> None:
        """Drop the buffer's audio with the Session that heard it: its words are not sent,
        and the next audio starts afresh."""
        if self.session is not None:
            self._close(self.session)
            self.session = None
        self.item = _Item(self.heard_ms)
        await self._send(Cleared())

    # -- items -----------------------------------------------------------------------------

    def _item_id(self) -> str:
        if self.item.id is None:
            self.item.id = new_id("item")
        return self.item.id

    async def _progress(self, partial: Partial) -> None:
        """Speech heard (with server_vad: the first letters of the turn), and the item's
        words that became stable."""
        item, vad = self.item, self.settings.turn_detection
        if vad is not None and partial.text and not item.spoke:
            start = max(item.start_ms, self.heard_ms - (vad.prefix_padding_ms or 0))
            await self._speech_started(start)
        if delta := _delta(item.sent, partial.stable):
            item.sent += delta
            await self._send(Delta(item_id=self._item_id(), delta=delta))

    async def _speech_started(self, start_ms: float) -> None:
        self.item.spoke = True
        await self._send(SpeechStarted(audio_start_ms=round(start_ms), item_id=self._item_id()))

    async def _complete(
        self, final: Final, began: float, by_vad: bool, quiet: bool = False
    ) -> None:
        """End the item with `final`: (speech_stopped,) committed, the rest of its text as
        a delta, completed. `by_vad`: the turn's silence ended it; `quiet`: an item with
        nothing said and nothing sent ends unannounced (a silence, not a turn)."""
        item = self.item
        end_ms = self._end_ms(final) if by_vad else self.heard_ms
        if (by_vad or quiet) and not (item.id or final.text):
            self.item = _Item(end_ms)
            return
        item_id = self._item_id()
        if by_vad:
            if not item.spoke:  # no partial showed it: where its first word begins
                vad = self.settings.turn_detection
                first = final.words[0].start * 1000 if final.words else 0.0
                padding = vad.prefix_padding_ms or 0 if vad is not None else 0
                await self._speech_started(max(item.start_ms, self.origin_ms + first - padding))
            await self._send(SpeechStopped(audio_end_ms=round(end_ms), item_id=item_id))
        await self._send(Committed(item_id=item_id, previous_item_id=self.previous))
        if rest := _delta(item.sent, final.text):
            await self._send(Delta(item_id=item_id, delta=rest))
        seconds = round(max(end_ms - item.start_ms, 0.0) / 1000, 3)
        logprobs = _logprobs(final) if self.settings.logprobs else None
        await self._send(
            Completed(
                item_id=item_id,
                transcript=final.text,
                usage=DurationUsage(seconds=seconds),
                logprobs=logprobs,
            )
        )
        self.res.metrics.eou_latency_seconds.observe(time.perf_counter() - began)
        self.previous, self.item = item_id, _Item(end_ms)

    def _end_ms(self, final: Final) -> float:
        """Where a turn that silence ended ends: its segment's end (the silence included),
        within the audio the item holds."""
        end = self.origin_ms + 1000 * (final.start + final.duration)
        return min(max(end, self.item.start_ms), self.heard_ms)

    async def _failed(self, error: SessionError) -> None:
        """The item's transcription failed: say so, drop the Session (the next audio starts
        a new one) and go on."""
        self.res.metrics.errors.labels(error.code).inc()
        body = ErrorBody(type=error.openai_type, code=error.code, message=error.message)
        await self._send(Failed(item_id=self._item_id(), error=body))
        if self.session is not None:
            self._close(self.session)
            self.session = None
        self.item = _Item(self.heard_ms)

    async def _send(self, event: ServerEvent) -> None:
        await self.ws.send_text(event.model_dump_json())


def _hotwords(
    transcription: Transcription, event_id: str | None
) -> tuple[Hotwords, list[EventError]]:
    """The phrases the session favours: the keywords (normalised as /v1/stream's hotwords
    are) and the prompt's (split and normalised as the REST endpoint's prompt is), with
    their capitals; and an error for each keyword left out for having nothing to spell."""
    try:
        prompted = prompt_hotwords(transcription.prompt or "")
    except ValueError as e:
        raise EventError("bad_config", str(e), _PROMPT, event_id) from None
    keywords = normalise_hotwords(transcription.keywords or [])
    refused = [
        EventError("hotword_refused", keywords.refusal(k, "keywords"), _KEYWORDS, event_id)
        for k in keywords.refused
    ]
    hotwords = merged(keywords, prompted)
    if len(hotwords.phrases) > MAX_HOTWORDS:
        raise EventError(
            "bad_config",
            f"the prompt and keywords hold {len(hotwords.phrases)} phrases; at most "
            f"{MAX_HOTWORDS} are favoured",
            _PROMPT,
            event_id,
        )
    return hotwords, refused


def _delta(sent: str, text: str) -> str:
    """What `text` adds to the item's text sent so far ('' when it adds nothing)."""
    if text.startswith(sent):
        return text[len(sent) :]
    log.warning("a transcript delta would take back sent text %r for %r; skipped", sent, text)
    return ""


def _logprobs(final: Final) -> list[LogProb]:
    """One entry a word, its token as the transcript writes it with the space before it
    (the tokens add up to the transcript), its logprob the mean log posterior of its
    letters' frames (the log of the decoder's word confidence)."""
    tokens = [(" " if i else "") + t for i, t in enumerate(written_tokens(final))]
    return [
        LogProb(
            token=t, logprob=round(math.log(max(w.conf, CONF_FLOOR)), 4), bytes=list(t.encode())
        )
        for t, w in zip(tokens, final.words, strict=True)
    ]
