"""Wire messages of `/v1/stream`, `/vosk` and the OpenAI-compatible REST endpoint (OpenAI's
Realtime events are in server/realtime_protocol.py).

Client messages are validated here, at the boundary, with errors that say what to change;
server messages are plain pydantic models dumped to JSON. `loadtest/` imports this module
for message types, so it must stay free of server internals.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MIN_RATE, MAX_RATE = 8000, 48000
Encoding = Literal["pcm_s16le", "f32le"]
M = TypeVar("M", bound=BaseModel)
# phrases the decoder favours: /v1/stream's `hotwords`, Vosk's `phrase_list`, the Realtime
# `keywords` (server/hotwords.py normalises them as transcripts are)
HotwordList = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=100)
]
# configs and controls are flat objects; a deeper message is refused the same way whether or
# not json.loads reaches the interpreter's recursion limit on it (which depends on the stack)
MAX_JSON_DEPTH = 32


class ProtocolError(ValueError):
    """A client message that breaks the protocol; `code` names the rule."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- /v1/stream: client -> server -----------------------------------------------------------


class StreamConfig(BaseModel):
    """The first message of a stream."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["config"]
    sample_rate: Annotated[int, Field(ge=MIN_RATE, le=MAX_RATE)]
    encoding: Encoding = "pcm_s16le"
    partials: bool = True  # send partial results as the transcript changes
    n_best: Annotated[int, Field(ge=1, le=10)] = 1  # hypotheses in the final (1 + alternatives)
    word_timestamps: bool = True  # words with start/end/conf in the final
    hotwords: HotwordList = []
    # trailing silence that ends a segment with a final (several finals per stream); 0: off
    endpoint_ms: Annotated[int, Field(ge=0, le=10000)] = 0
    # fit a profile of the speaker from the stream's audio and hear the rest through it
    # (null: the server's `--adapt-speakers`); true also sends each profile fitted as a
    # `speaker_profile` message
    adapt_speaker: bool | None = None
    # the `profile` of a speaker_profile message from an earlier stream of the same speaker:
    # heard through it from the start (server/profiles.py)
    speaker_profile: Annotated[str, Field(min_length=1, max_length=16384)] | None = None
    # partials and finals as written text, with punctuation and capitals, where the server's
    # bundle has a punctuator (server/written.py); plain words otherwise
    punctuate: bool = False


class EndOfStream(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["eos"]


# -- /v1/stream: server -> client -----------------------------------------------------------


class Word(BaseModel):
    word: str
    start: float  # seconds from the start of the stream
    end: float
    conf: float  # 0..1


class Partial(BaseModel):
    type: Literal["partial"] = "partial"
    text: str  # the best hypothesis so far
    stable: str  # the prefix of `text` that later audio cannot change


class SpeakerProfile(BaseModel):
    type: Literal["speaker_profile"] = "speaker_profile"
    profile: str  # a token to send back as `speaker_profile` in a later stream's config
    seconds: float  # the stream's audio it was fitted on


class Alternative(BaseModel):
    text: str
    score: float  # total log score; higher is better
    words: list[Word] | None = None  # only where a transport asks (Vosk's alternatives)


class Final(BaseModel):
    type: Literal["final"] = "final"
    text: str
    score: float = 0.0  # total log score of `text`, as the alternatives' scores
    words: list[Word]
    alternatives: list[Alternative]  # the n-best after the first, best first
    start: float = 0.0  # where this final's segment starts (after an endpoint), in seconds
    duration: float  # seconds of this final's segment (the whole stream without endpoints)


class Error(BaseModel):
    type: Literal["error"] = "error"
    code: str
    message: str


class StreamWarning(BaseModel):
    """Something of the config left out while the stream goes on (a hotword with nothing to
    spell); unlike an error, no close follows."""

    type: Literal["warning"] = "warning"
    code: str
    message: str


def parse_stream_config(text: str) -> StreamConfig:
    return _parse(
        StreamConfig, text, "config", 'start with {"type": "config", "sample_rate": 16000}'
    )


def parse_control(text: str) -> EndOfStream:
    """A text message after the config: only `{"type": "eos"}` is allowed."""
    return _parse(EndOfStream, text, "eos", 'send audio as binary frames, then {"type": "eos"}')


def _parse(model: type[M], text: str, expected: str, hint: str) -> M:
    data = json_object(text)
    got = data.get("type")
    if got != expected:
        raise ProtocolError(
            "out_of_order", f"expected a {expected!r} message here, got type {got!r}; {hint}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ProtocolError("bad_config", _describe(e)) from None


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0, {} and [] are 1), without recursion."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return deepest


def _too_deep() -> ProtocolError:
    return ProtocolError(
        "bad_message",
        f"text messages must be small JSON objects, nested at most {MAX_JSON_DEPTH} deep",
    )


def json_object(text: str) -> dict[str, Any]:
    """A text message as a JSON object, or a ProtocolError (`bad_message`) that says why not."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProtocolError("bad_message", f"text messages must be JSON: {e}") from None
    except RecursionError:  # how deep json gets depends on the stack: the limit decides
        raise _too_deep() from None
    except ValueError as e:  # a number of over 4300 digits
        raise ProtocolError(
            "bad_message", f"text messages must be small JSON objects; this one is not: {e}"
        ) from None
    if json_depth(data) > MAX_JSON_DEPTH:
        raise _too_deep()
    if not isinstance(data, dict):
        raise ProtocolError(
            "bad_message", f"text messages must be JSON objects, got {type(data).__name__}"
        )
    return data


def _describe(error: ValidationError) -> str:
    """One line per problem: `field: what is wrong`."""
    parts = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"]) or "message"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


# -- /vosk -----------------------------------------------------------------------------------


class VoskConfig(BaseModel):
    """`{"config": {...}}` as vosk-server reads it; fields it does not know (`model`, ...)
    are ignored, as Vosk ignores what it does not use."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    sample_rate: Annotated[float, Field(ge=MIN_RATE, le=MAX_RATE)] = 16000
    words: bool = True  # results carry their words (vosk-server's default)
    max_alternatives: Annotated[int, Field(ge=0)] = 0  # > 0: results as an n-best list
    # Vosk's grammar; here phrases the decoder favours (hotwords), not the only ones allowed
    phrase_list: Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=100)] = []
    # not Vosk's: results as written text, with punctuation and capitals, where the server's
    # bundle has a punctuator; Vosk's clients expect plain words, so off unless asked
    punctuate: bool = False


VoskControl = Literal["eof", "reset"]


class VoskWord(BaseModel):
    conf: float
    end: float
    start: float
    word: str


class VoskResult(BaseModel):
    result: list[VoskWord] | None = None  # absent without words, or with none, as in Vosk
    text: str


class VoskTimedWord(BaseModel):
    """A word of an alternative: Vosk gives these no confidence."""

    word: str
    start: float
    end: float


class VoskAlternative(BaseModel):
    text: str
    confidence: float  # the hypothesis' total log score; higher is better
    result: list[VoskTimedWord] | None = None


class VoskAlternatives(BaseModel):
    alternatives: list[VoskAlternative]  # best first


class VoskPartial(BaseModel):
    partial: str


def parse_vosk_text(text: str) -> VoskConfig | VoskControl:
    """A Vosk text message: `{"config": {...}}`, `{"eof" : 1}` or `{"reset" : 1}` (those
    exact strings, with their space, are what Vosk's clients send; any spacing is taken)."""
    data = json_object(text)
    if "eof" in data:
        return "eof"
    if "reset" in data:
        return "reset"
    config = data.get("config")
    if not isinstance(config, dict):
        raise ProtocolError(
            "bad_message", 'vosk text messages are {"config": {...}}, {"eof" : 1} or {"reset" : 1}'
        )
    try:
        return VoskConfig.model_validate(config)
    except ValidationError as e:
        raise ProtocolError("bad_config", _describe(e)) from None


# -- OpenAI-compatible REST ------------------------------------------------------------------

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt"]
RESPONSE_FORMATS: tuple[str, ...] = ("json", "text", "verbose_json", "srt", "vtt")


class OpenAIErrorBody(BaseModel):
    message: str
    type: str  # invalid_request_error | server_error | ...
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    error: OpenAIErrorBody


class OpenAIModel(BaseModel):
    """An entry of `GET /v1/models`: the served bundle."""

    id: str  # the bundle's directory name
    object: Literal["model"] = "model"
    created: int  # Unix seconds: when the bundle was written
    owned_by: str = "harken"


class OpenAIModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


class TextDelta(BaseModel):
    """`stream=true`: more of the transcript, appended to what came before."""

    type: Literal["transcript.text.delta"] = "transcript.text.delta"
    delta: str


class TextDone(BaseModel):
    """`stream=true`: the last event, with the whole transcript."""

    type: Literal["transcript.text.done"] = "transcript.text.done"
    text: str


class Segment(BaseModel):
    id: int
    seek: int = 0
    start: float
    end: float
    text: str
    tokens: list[int] = []
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 1.0
    no_speech_prob: float = 0.0


class TimedWord(BaseModel):
    word: str
    start: float
    end: float


class VerboseTranscription(BaseModel):
    task: Literal["transcribe"] = "transcribe"
    language: str = "english"
    duration: float
    text: str
    segments: list[Segment] | None = None
    words: list[TimedWord] | None = None
