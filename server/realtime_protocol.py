"""Events of `/v1/realtime?intent=transcription`, OpenAI's Realtime transcription protocol.

The `openai` package's `types/realtime/` is the source for every name and shape here. The
GA shape is the one followed: `session.update` with `session.type: "transcription"` and
`audio.input.{format, transcription, turn_detection, noise_reduction}`, and `include`. The
older beta names map onto it where that costs nothing: `transcription_session.update`, and
`input_audio_format` ("pcm16", "g711_ulaw", "g711_alaw"), `input_audio_transcription`,
`turn_detection` and `input_audio_noise_reduction` at the session's top level.

Client events are validated here, at the boundary, into `EventError`s that carry OpenAI's
`param` and the client's `event_id`; server events are pydantic models dumped to JSON.
docs/realtime.md says, field by field, what is served, accepted and ignored, or refused.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from server.protocol import HotwordList, ProtocolError, json_object

LOGPROBS = "item.input_audio_transcription.logprobs"  # the one `include` there is
TAKEN = (
    "session.update, input_audio_buffer.append, input_audio_buffer.commit and "
    "input_audio_buffer.clear"
)
SHAPE = (
    "a transcription session follows OpenAI's GA Realtime shape: session.type "
    '"transcription", session.audio.input.{format, transcription, turn_detection, '
    "noise_reduction}, session.include"
)
# client events of OpenAI's conversation sessions: none has a meaning in a transcription one
CONVERSATION_EVENTS = frozenset(
    {
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
        "output_audio_buffer.clear",
    }
)
ENGLISH = ("en", "english")  # what `language` may say: the model transcribes English only
# validation errors that mean another shape than the one followed: their message names it
_SHAPE_ERRORS = frozenset({"extra_forbidden", "literal_error", "union_tag_invalid", "missing"})
_BETA_FORMATS = {"pcm16": "audio/pcm", "g711_ulaw": "audio/pcmu", "g711_alaw": "audio/pcma"}
_BETA_FIELDS = {  # the beta's top-level session fields, and where GA puts them in audio.input
    "input_audio_format": "format",
    "input_audio_transcription": "transcription",
    "turn_detection": "turn_detection",
    "input_audio_noise_reduction": "noise_reduction",
}


class EventError(ValueError):
    """A client event the session cannot take; the session goes on. `code` is harken's
    (as on the REST endpoint), `param` the field at fault, `event_id` the client's."""

    def __init__(
        self, code: str, message: str, param: str | None = None, event_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.param, self.event_id = code, message, param, event_id


# -- the session a client configures ------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PcmFormat(_Strict):
    """16-bit little-endian mono PCM."""

    type: Literal["audio/pcm"]
    rate: Literal[24000] = 24000  # OpenAI's only rate; resampled to the model's


class G711Format(_Strict):
    """8 kHz G.711: μ-law (`audio/pcmu`) or A-law (`audio/pcma`)."""

    type: Literal["audio/pcmu", "audio/pcma"]


AudioFormat = Annotated[PcmFormat | G711Format, Field(discriminator="type")]


class Transcription(_Strict):
    model: str | None = None  # any name: the served bundle answers
    language: str | None = None  # ISO-639-1; English only
    # OpenAI's guide for the transcriber; here its phrases (split at , ; : and lines) are
    # favoured as hotwords, as the REST endpoint's prompt is (server/hotwords.py)
    prompt: Annotated[str, Field(max_length=4096)] | None = None
    keywords: HotwordList | None = None  # favoured as hotwords, as given
    languages: list[str] | None = None  # English only
    delay: Literal["minimal", "low", "medium", "high", "xhigh"] | None = None  # ignored

    @field_validator("language")
    @classmethod
    def _english(cls, language: str | None) -> str | None:
        if language and language.lower() not in ENGLISH:
            raise ValueError(f"this model transcribes English only ('en'); got {language!r}")
        return language

    @field_validator("languages")
    @classmethod
    def _all_english(cls, languages: list[str] | None) -> list[str] | None:
        for language in languages or []:
            cls._english(language)
        return languages


class ServerVad(_Strict):
    """Turn detection. Speech is what the model hears as letters (its frames whose most
    probable symbol is not the blank), so `threshold` has nothing to set; the turn ends
    after `silence_duration_ms` of blank frames, the endpoint `/v1/stream`'s `endpoint_ms`
    sets."""

    type: Literal["server_vad"]
    threshold: Annotated[float, Field(ge=0, le=1)] | None = None  # accepted, ignored
    prefix_padding_ms: Annotated[int, Field(ge=0, le=10000)] | None = None
    silence_duration_ms: Annotated[int, Field(ge=1, le=10000)] | None = None
    create_response: bool | None = None  # no responses in a transcription session
    interrupt_response: bool | None = None  # nor any to interrupt
    idle_timeout_ms: Annotated[int, Field(ge=0)] | None = None  # ignored: no timeout events


DEFAULT_FORMAT = PcmFormat(type="audio/pcm")  # OpenAI's: 24 kHz PCM16
DEFAULT_VAD = ServerVad(
    type="server_vad", threshold=0.5, prefix_padding_ms=300, silence_duration_ms=500
)  # OpenAI's defaults


class NoiseReduction(_Strict):
    type: Literal["near_field", "far_field"] | None = None  # accepted, ignored
    strength: float | None = None


class AudioInput(_Strict):
    format: AudioFormat | None = None
    transcription: Transcription | None = None
    turn_detection: ServerVad | None = None  # null: the client commits each turn
    noise_reduction: NoiseReduction | None = None


class Audio(_Strict):
    input: AudioInput | None = None


class SessionConfig(_Strict):
    type: Literal["transcription"]
    audio: Audio | None = None
    include: list[Literal["item.input_audio_transcription.logprobs"]] | None = None


@dataclass(frozen=True)
class Settings:
    """A transcription session's effective configuration."""

    format: PcmFormat | G711Format = DEFAULT_FORMAT
    transcription: Transcription = Transcription()
    turn_detection: ServerVad | None = DEFAULT_VAD
    noise_reduction: NoiseReduction | None = None
    logprobs: bool = False  # `include` asked for the completed transcripts' logprobs

    @property
    def rate(self) -> int:
        return self.format.rate if isinstance(self.format, PcmFormat) else 8000

    def updated(self, config: SessionConfig) -> Settings:
        """These settings with the fields `config` holds replaced ("only the fields that
        are present in the session.update are updated"; a null turn detection, too)."""
        changes: dict[str, Any] = {}
        if "include" in config.model_fields_set:
            changes["logprobs"] = LOGPROBS in (config.include or [])
        given = config.audio.input if config.audio and config.audio.input else None
        for name in given.model_fields_set if given else ():
            changes[name] = getattr(given, name)
        if "format" in changes and changes["format"] is None:
            changes["format"] = DEFAULT_FORMAT
        if "transcription" in changes and changes["transcription"] is None:
            changes["transcription"] = Transcription()
        if vad := changes.get("turn_detection"):  # OpenAI's defaults where left out
            unset = {k: getattr(DEFAULT_VAD, k) for k in ServerVad.model_fields}
            changes["turn_detection"] = vad.model_copy(
                update={k: v for k, v in unset.items() if getattr(vad, k) is None}
            )
        return dataclasses.replace(self, **changes)

    def session(self, session_id: str, model: str) -> dict[str, Any]:
        """The session object of `session.created` / `session.updated` (GA shape)."""
        return {
            "id": session_id,
            "object": "realtime.transcription_session",
            "type": "transcription",
            "audio": {"input": self._input(model)},
            "include": [LOGPROBS] if self.logprobs else [],
        }

    def beta_session(self, session_id: str, model: str) -> dict[str, Any]:
        """The same, as the beta's `transcription_session.updated` carried it."""
        given = self._input(model)
        beta = {v: k for k, v in _BETA_FORMATS.items()}
        return {
            "id": session_id,
            "object": "realtime.transcription_session",
            "input_audio_format": beta[self.format.type],
            **{old: given[new] for old, new in _BETA_FIELDS.items() if new != "format"},
            "include": [LOGPROBS] if self.logprobs else [],
        }

    def _input(self, model: str) -> dict[str, Any]:
        transcription = self.transcription.model_dump(exclude_none=True)
        vad, noise = self.turn_detection, self.noise_reduction
        return {
            "format": self.format.model_dump(),
            "transcription": {"model": model, "language": "en", **transcription},
            "turn_detection": None if vad is None else vad.model_dump(),
            "noise_reduction": None if noise is None else noise.model_dump(),
        }


# -- client events ------------------------------------------------------------------------


class SessionUpdate(_Strict):
    type: Literal["session.update", "transcription_session.update"]
    session: SessionConfig
    event_id: str | None = None


class Append(_Strict):
    type: Literal["input_audio_buffer.append"]
    audio: str  # base64 of audio in the session's format
    event_id: str | None = None


class Commit(_Strict):
    type: Literal["input_audio_buffer.commit"]
    event_id: str | None = None


class Clear(_Strict):
    type: Literal["input_audio_buffer.clear"]
    event_id: str | None = None


ClientEvent = SessionUpdate | Append | Commit | Clear
_EVENTS: dict[str, type[ClientEvent]] = {
    "session.update": SessionUpdate,
    "transcription_session.update": SessionUpdate,
    "input_audio_buffer.append": Append,
    "input_audio_buffer.commit": Commit,
    "input_audio_buffer.clear": Clear,
}


def parse_event(text: str) -> ClientEvent:
    """A client's text message as one of the events a transcription session takes, or an
    EventError that says what to change."""
    try:
        data = json_object(text)
    except ProtocolError as e:
        raise EventError("bad_message", str(e)) from None
    event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
    kind = data.get("type")
    model = _EVENTS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise _unknown(kind, event_id)
    if model is SessionUpdate:
        data = {**data, "session": _ga_session(data.get("session"), str(kind), event_id)}
    try:
        return model.model_validate(data)
    except ValidationError as e:
        code = "bad_config" if model is SessionUpdate else "bad_message"
        param, message = _describe(e)
        shape = any(problem["type"] in _SHAPE_ERRORS for problem in e.errors())
        hint = f"; {SHAPE}" if model is SessionUpdate and shape else ""
        raise EventError(code, message + hint, param, event_id) from None


def _unknown(kind: object, event_id: str | None) -> EventError:
    if not isinstance(kind, str):
        return EventError(
            "bad_message",
            f'every event needs a "type" string; a transcription session takes {TAKEN}',
            "type",
            event_id,
        )
    if kind in CONVERSATION_EVENTS:
        return EventError(
            "unsupported",
            f"{kind!r} belongs to OpenAI's conversation sessions; this server serves "
            f"transcription sessions (?intent=transcription), which take {TAKEN}",
            "type",
            event_id,
        )
    return EventError(
        "bad_message",
        f"unknown event type {kind!r}; a transcription session takes {TAKEN}",
        "type",
        event_id,
    )


def _ga_session(session: object, kind: str, event_id: str | None) -> object:
    """The beta's top-level fields moved to where GA has them; a beta event's session is a
    transcription session. Anything but an object is left for validation to refuse."""
    if not isinstance(session, dict):
        return session
    beta = {k: session[k] for k in _BETA_FIELDS if k in session}
    ga = {k: v for k, v in session.items() if k not in beta}
    if kind == "transcription_session.update":
        ga.setdefault("type", "transcription")
    elif ga.get("type") != "transcription":
        raise _wrong_type(ga.get("type"), event_id)
    if not beta:
        return ga
    audio: dict[str, Any] = ga["audio"] if isinstance(ga.get("audio"), dict) else {}
    given: dict[str, Any] = dict(audio["input"]) if isinstance(audio.get("input"), dict) else {}
    for old, new in _BETA_FIELDS.items():
        if old not in beta:
            continue
        if new in given:
            raise EventError(
                "bad_config",
                f"session.{old} and session.audio.input.{new} are the beta's and GA's name "
                "for one setting; send one",
                f"session.{old}",
                event_id,
            )
        value = beta[old]
        if new == "format" and isinstance(value, str):  # "pcm16": 24 kHz, as GA's default
            value = {"type": _BETA_FORMATS.get(value, value)}
        given[new] = value
    return {**ga, "audio": {**audio, "input": given}}


def _wrong_type(got: object, event_id: str | None) -> EventError:
    return EventError(
        "bad_config",
        f"session.type must be 'transcription', got {got!r}: this server serves OpenAI's "
        "Realtime transcription sessions only, not conversations (realtime) or "
        f"translations; {SHAPE}",
        "session.type",
        event_id,
    )


def _describe(error: ValidationError) -> tuple[str | None, str]:
    """The first problem's field (OpenAI's `param`), and one line per problem."""
    problems = error.errors()
    fields = [".".join(str(p) for p in e["loc"]) for e in problems]
    message = "; ".join(
        f"{f or 'event'}: {e['msg']}" for f, e in zip(fields, problems, strict=True)
    )
    return (fields[0] or None) if fields else None, message


# -- server events -------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    """An id as OpenAI's look: `event_…`, `item_…`, `sess_…`."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class ServerEvent(BaseModel):
    event_id: str = Field(default_factory=lambda: new_id("event"))


class SessionCreated(ServerEvent):
    type: Literal["session.created"] = "session.created"
    session: dict[str, Any]


class SessionUpdated(ServerEvent):
    type: Literal["session.updated", "transcription_session.updated"] = "session.updated"
    session: dict[str, Any]


class SpeechStarted(ServerEvent):
    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int  # from the start of the session's audio, prefix padding included
    item_id: str


class SpeechStopped(ServerEvent):
    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int  # where the silence that ended the turn ended
    item_id: str


class Committed(ServerEvent):
    type: Literal["input_audio_buffer.committed"] = "input_audio_buffer.committed"
    item_id: str
    previous_item_id: str | None


class Cleared(ServerEvent):
    type: Literal["input_audio_buffer.cleared"] = "input_audio_buffer.cleared"


class LogProb(BaseModel):
    token: str  # a word, with the space before it: the tokens add up to the transcript
    logprob: float  # natural log
    bytes: list[int]  # the token's UTF-8 bytes


class Delta(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.delta"] = (
        "conversation.item.input_audio_transcription.delta"
    )
    item_id: str
    content_index: int = 0
    delta: str  # appended to the item's transcript so far; never taken back


class DurationUsage(BaseModel):
    type: Literal["duration"] = "duration"
    seconds: float  # the item's audio


class Completed(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed"
    )
    item_id: str
    content_index: int = 0
    transcript: str  # what the item's deltas added up to
    usage: DurationUsage
    logprobs: list[LogProb] | None = None  # with `include`: one per word


class ErrorBody(BaseModel):
    type: str  # invalid_request_error | server_error
    code: str | None
    message: str
    param: str | None = None
    event_id: str | None = None  # the client event at fault


class ErrorEvent(ServerEvent):
    type: Literal["error"] = "error"
    error: ErrorBody


class Failed(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    item_id: str
    content_index: int = 0
    error: ErrorBody
