"""`/v1/realtime?intent=transcription`, OpenAI's Realtime transcription protocol: the official
`openai` client against a real server; each event raw, checked against the `openai`
package's own models; deltas that add up to the completed transcript and come before the
commit; manual and server_vad turns; G.711; the beta's names; bad events answered in
OpenAI's error shape while the session goes on; limits; faults and fuzzed input that harm
no other stream and leave nothing held."""

from __future__ import annotations

import base64
import io
import json
import math
import socket
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pydantic
import pytest
import soundfile
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from openai.types import realtime as sdk
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from models.punctuation import Punctuator, join, write_all
from server.audio import Resampler
from server.config import DEFAULT_BUNDLE, ServerConfig
from server.g711 import decode_g711
from server.realtime_protocol import EventError, parse_event
from server.ws_frames import MAX_FRAME_BYTES
from tests.server.serving import (
    F32,
    Running,
    assert_nothing_held,
    eventually,
    make_audio,
    pcm16,
    reference_text,
    running,
    speak,
)
from tests.server.test_faults import FailNewStream, errors_counted
from tests.server.test_fuzz import ANY_TEXT, FRAMES, JSON_VALUES, server_errors

PATH = "/v1/realtime?intent=transcription"
WAIT = 30.0  # seconds: the longest a test waits for an event
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"
SDK_EVENTS: dict[str, type[pydantic.BaseModel]] = {  # what OpenAI's client parses them as
    "session.created": sdk.SessionCreatedEvent,
    "session.updated": sdk.SessionUpdatedEvent,
    "input_audio_buffer.speech_started": sdk.InputAudioBufferSpeechStartedEvent,
    "input_audio_buffer.speech_stopped": sdk.InputAudioBufferSpeechStoppedEvent,
    "input_audio_buffer.committed": sdk.InputAudioBufferCommittedEvent,
    "input_audio_buffer.cleared": sdk.InputAudioBufferClearedEvent,
    DELTA: sdk.ConversationItemInputAudioTranscriptionDeltaEvent,
    COMPLETED: sdk.ConversationItemInputAudioTranscriptionCompletedEvent,
    "conversation.item.input_audio_transcription.failed": (
        sdk.ConversationItemInputAudioTranscriptionFailedEvent
    ),
    "error": sdk.RealtimeErrorEvent,
}
KNOWN = {*SDK_EVENTS, "transcription_session.updated"}  # the last: the beta's answer
MANUAL = {"turn_detection": None}  # 24 kHz PCM16, OpenAI's default, and manual commits


# -- a client ----------------------------------------------------------------------------


def open_realtime(server: Running, path: str = PATH, **kwargs: Any) -> ClientConnection:
    """A connection that has had its `session.created`."""
    ws = connect(f"{server.ws}{path}", close_timeout=5, legacy=True, **kwargs)
    assert receive(ws)["type"] == "session.created"
    return ws


def send(ws: ClientConnection, kind: str, **fields: Any) -> None:
    ws.send(json.dumps({"type": kind, **fields}))


def update(ws: ClientConnection, event_id: str | None = None, **audio_input: Any) -> None:
    session: dict[str, Any] = {"type": "transcription", "audio": {"input": audio_input}}
    send(ws, "session.update", session=session, **({"event_id": event_id} if event_id else {}))


def append(ws: ClientConnection, audio: bytes, step: int = 3200) -> None:
    """`audio` in appends of `step` bytes."""
    for i in range(0, len(audio), step):
        send(ws, "input_audio_buffer.append", audio=base64.b64encode(audio[i : i + step]).decode())


def receive(ws: ClientConnection) -> dict[str, Any]:
    """The next event, checked against the model OpenAI's client parses it with."""
    message = json.loads(ws.recv(timeout=WAIT))
    assert message["type"] in KNOWN, message
    if model := SDK_EVENTS.get(message["type"]):
        model.model_validate(message)
    return dict(message)


def until(ws: ClientConnection, kind: str, count: int = 1) -> list[dict[str, Any]]:
    """Events up to and including the `count`th of type `kind`."""
    events: list[dict[str, Any]] = []
    while sum(e["type"] == kind for e in events) < count:
        events.append(receive(ws))
    return events


def manual(ws: ClientConnection, **audio_input: Any) -> dict[str, Any]:
    """Turn detection off, 16 kHz PCM (unless `audio_input` says otherwise): the session."""
    update(ws, **{**MANUAL, **audio_input})
    updated = receive(ws)
    assert updated["type"] == "session.updated", updated
    return dict(updated["session"])


def transcribe(ws: ClientConnection, audio: bytes) -> tuple[list[dict[str, Any]], str]:
    """Append, commit: the item's events and its completed transcript, checking that its
    deltas add up to it."""
    append(ws, audio)
    send(ws, "input_audio_buffer.commit")
    events = until(ws, COMPLETED)
    completed = events[-1]
    item = completed["item_id"]
    assert all(e.get("item_id") == item for e in events if e["type"] == DELTA)
    assert "".join(e["delta"] for e in events if e["type"] == DELTA) == completed["transcript"]
    return events, str(completed["transcript"])


def assert_openai_error(
    event: dict[str, Any], code: str, param: str | None = None, event_id: str | None = None
) -> str:
    """An `error` event in OpenAI's shape; its message."""
    assert event["type"] == "error" and set(event) == {"type", "event_id", "error"}, event
    error = event["error"]
    assert set(error) == {"type", "code", "message", "param", "event_id"}, error
    assert error["type"] == "invalid_request_error" and error["code"] == code, error
    assert error["param"] == param and error["event_id"] == event_id, error
    assert len(error["message"]) > 20
    return str(error["message"])


def heard(bundle: Path, pcm: bytes, rate: int) -> str:
    """The offline transcript of PCM16 at `rate`, resampled as the server does."""
    audio = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    return reference_text(bundle, Resampler(rate, 16000).push(audio, last=True))


def resample_pcm(audio: F32, rate: int) -> bytes:
    return pcm16(Resampler(16000, rate).push(audio, last=True))


UTTERANCE = resample_pcm(make_audio(1.5), 24000)  # the test utterance at OpenAI's rate


@pytest.fixture(scope="module")
def said(tiny_bundle: Path) -> str:
    """The offline transcript of UTTERANCE, which the server must reproduce."""
    return heard(tiny_bundle, UTTERANCE, 24000)


# -- the official client ------------------------------------------------------------------


def test_the_openai_client_transcribes_a_committed_turn(server: Running, tiny_bundle: Path) -> None:
    pcm = resample_pcm(make_audio(1.5), 24000)  # OpenAI's rate
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    with client.realtime.connect(model="harken", extra_query={"intent": "transcription"}) as rt:
        created = rt.recv()
        assert isinstance(created, sdk.SessionCreatedEvent)
        assert created.session.type == "transcription"
        rt.session.update(
            session={
                "type": "transcription",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}},
            }
        )
        rt.session.update(
            session={"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        )
        for i in range(0, len(pcm), 4800):
            rt.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        rt.input_audio_buffer.commit()
        events = []
        for received in rt:
            events.append(received)
            if isinstance(received, sdk.ConversationItemInputAudioTranscriptionCompletedEvent):
                break
    kinds = [e.type for e in events]
    assert kinds[:2] == ["session.updated", "session.updated"] and "error" not in kinds, kinds
    committed = next(e for e in events if isinstance(e, sdk.InputAudioBufferCommittedEvent))
    completed = events[-1]
    assert isinstance(completed, sdk.ConversationItemInputAudioTranscriptionCompletedEvent)
    assert committed.item_id == completed.item_id and committed.previous_item_id is None
    deltas = [
        e for e in events if isinstance(e, sdk.ConversationItemInputAudioTranscriptionDeltaEvent)
    ]
    assert "".join(d.delta or "" for d in deltas) == completed.transcript
    assert completed.transcript == heard(tiny_bundle, pcm, 24000)
    assert completed.usage.type == "duration" and completed.usage.seconds == 1.5


# -- events, raw --------------------------------------------------------------------------


def test_the_session_reports_its_defaults_and_an_update_changes_what_it_names(
    server: Running, tiny_bundle: Path
) -> None:
    with connect(f"{server.ws}{PATH}") as ws:
        session = receive(ws)["session"]
        assert session["type"] == "transcription" and session["include"] == []
        given = session["audio"]["input"]
        assert given["format"] == {"type": "audio/pcm", "rate": 24000}
        assert given["transcription"] == {"model": tiny_bundle.name, "language": "en"}
        vad = given["turn_detection"]
        assert (vad["type"], vad["threshold"], vad["prefix_padding_ms"]) == ("server_vad", 0.5, 300)
        assert vad["silence_duration_ms"] == 500
        update(ws, transcription={"model": "gpt-4o-transcribe", "language": "en"})
        given = receive(ws)["session"]["audio"]["input"]
        assert given["transcription"] == {"model": "gpt-4o-transcribe", "language": "en"}
        assert given["turn_detection"] == vad  # not named: unchanged
        update(ws, turn_detection={"type": "server_vad", "silence_duration_ms": 800})
        vad = receive(ws)["session"]["audio"]["input"]["turn_detection"]
        assert (vad["silence_duration_ms"], vad["prefix_padding_ms"]) == (800, 300)
        send(ws, "session.update", session={"type": "transcription", "include": [LOGPROBS]})
        session = receive(ws)["session"]
        assert session["include"] == [LOGPROBS]
        assert session["audio"]["input"]["transcription"]["model"] == "gpt-4o-transcribe"


LOGPROBS = "item.input_audio_transcription.logprobs"


def test_deltas_come_while_the_user_speaks_and_add_up_to_the_completed_transcript(
    server: Running, tiny_bundle: Path
) -> None:
    pcm = resample_pcm(make_audio(2.5, seed=5), 24000)
    with open_realtime(server) as ws:
        send(ws, "session.update", session={"type": "transcription", "include": [LOGPROBS]})
        receive(ws)
        manual(ws)
        append(ws, pcm)
        send(ws, "input_audio_buffer.commit", event_id="mine")
        events = until(ws, COMPLETED)
    kinds = [e["type"] for e in events]
    committed_at = kinds.index("input_audio_buffer.committed")
    assert kinds[0] == DELTA and committed_at > 0, kinds  # words before the commit
    assert kinds[committed_at + 1 :] in ([COMPLETED], [DELTA, COMPLETED]), kinds
    committed, completed = events[committed_at], events[-1]
    assert committed["item_id"] == completed["item_id"] and committed["previous_item_id"] is None
    text = completed["transcript"]
    assert "".join(e["delta"] for e in events if e["type"] == DELTA) == text
    assert text == heard(tiny_bundle, pcm, 24000) and len(text.split()) > 3
    assert completed["usage"] == {"type": "duration", "seconds": 2.5}
    logprobs = completed["logprobs"]
    assert "".join(p["token"] for p in logprobs) == text and len(logprobs) == len(text.split())
    for p in logprobs:
        assert bytes(p["bytes"]) == p["token"].encode()
        assert math.isfinite(p["logprob"]) and -8 < p["logprob"] <= 0


def test_transcripts_are_written_text_and_the_deltas_add_up_to_them(
    punctuated_server: Running, punctuated_bundle: Path
) -> None:
    """With a punctuator in the bundle, transcripts are written (punctuation, capitals) as
    OpenAI's are; the deltas, cut from the written stable text, stay append-only and add up
    to the completed transcript, and a keyword keeps its capitals."""
    punctuator = Punctuator.load(punctuated_bundle)
    assert punctuator is not None
    pcm = resample_pcm(make_audio(2.5, seed=5), 24000)
    plain = heard(punctuated_bundle, pcm, 24000)
    with open_realtime(punctuated_server) as ws:
        send(ws, "session.update", session={"type": "transcription", "include": [LOGPROBS]})
        receive(ws)
        manual(ws)
        events, text = transcribe(ws, pcm)
        manual(ws, transcription={"keywords": ["Smith", "iPhone"]})
        _, favoured = transcribe(ws, UTTERANCE)
    assert text == join(write_all(punctuator, plain.split())) != plain
    kinds = [e["type"] for e in events]
    assert kinds.index(DELTA) < kinds.index("input_audio_buffer.committed")  # before the commit
    assert "".join(p["token"] for p in events[-1]["logprobs"]) == text
    said = [t.rstrip(",.?") for t in favoured.split()]
    assert {"Smith", "iPhone"} & set(said), favoured  # the tiny model says one at once
    assert not {w for w in said if w.lower() in ("smith", "iphone")} - {"Smith", "iPhone"}


def test_items_follow_one_another_and_clear_drops_the_buffer(
    server: Running, tiny_bundle: Path
) -> None:
    """Each committed item reads as its audio alone; a clear drops what the buffer holds
    without an item, and a commit with nothing since is refused."""
    first, second = (resample_pcm(make_audio(s, seed=i), 24000) for s, i in ((1.0, 6), (1.5, 7)))
    with open_realtime(server) as ws:
        manual(ws)
        one, _ = transcribe(ws, first)
        two, after_commit = transcribe(ws, second)
    assert after_commit == heard(tiny_bundle, second, 24000)  # not the first item's audio too
    assert two[-1]["usage"]["seconds"] == 1.5
    committed = [e for e in two if e["type"] == "input_audio_buffer.committed"]
    assert committed[0]["previous_item_id"] == one[-1]["item_id"] != two[-1]["item_id"]
    with open_realtime(server) as ws:
        manual(ws)
        append(ws, first)
        send(ws, "input_audio_buffer.clear", event_id="drop")
        dropped = until(ws, "input_audio_buffer.cleared")
        assert {e["type"] for e in dropped} <= {DELTA, "input_audio_buffer.cleared"}, dropped
        send(ws, "input_audio_buffer.commit", event_id="nothing")
        assert_openai_error(receive(ws), "input_audio_buffer_commit_empty", None, "nothing")
        events, after_clear = transcribe(ws, second)
    assert after_clear == after_commit
    committed = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    assert committed[0]["previous_item_id"] is None  # the cleared audio made no item


def test_an_update_that_changes_the_format_mid_item_ends_the_item_first(
    server: Running, said: str
) -> None:
    """The buffered audio was heard in the old format: it ends its item as a commit would,
    then the new settings apply; an update that changes nothing of the audio goes unnoticed."""
    with open_realtime(server) as ws:
        manual(ws)
        append(ws, UTTERANCE)
        update(ws, transcription={"model": "whisper-1"})  # the audio is heard the same way
        assert {e["type"] for e in until(ws, "session.updated")} <= {DELTA, "session.updated"}
        update(ws, format={"type": "audio/pcmu"})
        events = until(ws, "session.updated")
        kinds = [e["type"] for e in events if e["type"] != DELTA]
        assert kinds == ["input_audio_buffer.committed", COMPLETED, "session.updated"], kinds
        assert events[-2]["transcript"] == said
        send(ws, "input_audio_buffer.commit", event_id="again")  # nothing left to commit
        assert_openai_error(receive(ws), "input_audio_buffer_commit_empty", None, "again")


def g711(pcm8k: bytes, subtype: str) -> bytes:
    """PCM16 at 8 kHz encoded by libsndfile as raw G.711."""
    buf = io.BytesIO()
    soundfile.write(buf, np.frombuffer(pcm8k, "<i2"), 8000, format="RAW", subtype=subtype)
    return buf.getvalue()


def libsndfile_decoded(data: bytes, subtype: str) -> bytes:
    samples, _ = soundfile.read(
        io.BytesIO(data), samplerate=8000, channels=1, format="RAW", subtype=subtype, dtype="int16"
    )
    return bytes(np.asarray(samples, "<i2").tobytes())


@pytest.mark.parametrize(("law", "subtype"), [("audio/pcmu", "ULAW"), ("audio/pcma", "ALAW")])
def test_g711_decodes_as_libsndfile_does_and_transcribes(
    server: Running, tiny_bundle: Path, law: str, subtype: str
) -> None:
    every = bytes(range(256))
    mine = (decode_g711(every, law) * 32768).astype("<i2").tobytes()  # type: ignore[arg-type]
    assert mine == libsndfile_decoded(every, subtype)
    data = g711(resample_pcm(make_audio(1.5), 8000), subtype)
    with open_realtime(server) as ws:
        assert manual(ws, format={"type": law})["audio"]["input"]["format"] == {"type": law}
        _, text = transcribe(ws, data)
    assert text == heard(tiny_bundle, libsndfile_decoded(data, subtype), 8000)


def test_the_betas_names_are_taken(server: Running, tiny_bundle: Path) -> None:
    data = g711(resample_pcm(make_audio(1.5), 8000), "ULAW")
    with open_realtime(server) as ws:
        beta = {
            "input_audio_format": "g711_ulaw",
            "input_audio_transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": None,
            "include": [LOGPROBS],
        }
        send(ws, "transcription_session.update", session=beta)
        answer = receive(ws)
        assert answer["type"] == "transcription_session.updated", answer
        session = answer["session"]
        assert session["input_audio_format"] == "g711_ulaw" and session["turn_detection"] is None
        assert session["input_audio_transcription"]["model"] == "gpt-4o-transcribe"
        _, text = transcribe(ws, data)
        assert text == heard(tiny_bundle, libsndfile_decoded(data, "ULAW"), 8000)
        # GA's event with the beta's top-level names; one setting under both names is refused
        send(ws, "session.update", session={"type": "transcription", "input_audio_format": "pcm16"})
        assert receive(ws)["session"]["audio"]["input"]["format"]["type"] == "audio/pcm"
        both = {"type": "transcription", "turn_detection": None, "audio": {"input": MANUAL}}
        send(ws, "session.update", session=both, event_id="both")
        assert "send one" in assert_openai_error(
            receive(ws), "bad_config", "session.turn_detection", "both"
        )


def stream_final(server: Running, **config: Any) -> dict[str, Any]:
    """/v1/stream's final of UTTERANCE with `config`."""
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 24000, **config}))
        ws.send(UTTERANCE)
        ws.send(json.dumps({"type": "eos"}))
        return next(m for m in map(json.loads, ws) if m["type"] == "final")


def test_the_prompt_and_keywords_are_favoured_as_v1_streams_hotwords_are(
    server: Running, said: str
) -> None:
    runner_up = stream_final(server, n_best=5)["alternatives"][0]["text"]
    favoured = stream_final(server, hotwords=[runner_up])["text"]
    assert favoured != said  # the hotword changes what is heard: the test can tell
    for transcription in ({"prompt": runner_up}, {"keywords": [runner_up]}):
        with open_realtime(server) as ws:
            manual(ws, transcription=transcription)
            assert transcribe(ws, UTTERANCE)[1] == favoured, transcription
    with open_realtime(server) as ws:  # a keyword with nothing to spell is left out, said so
        update(ws, event_id="kw", **MANUAL, transcription={"keywords": ["!!!", runner_up]})
        assert receive(ws)["type"] == "session.updated"
        message = assert_openai_error(
            receive(ws), "hotword_refused", "session.audio.input.transcription.keywords", "kw"
        )
        assert "'!!!'" in message
        assert transcribe(ws, UTTERANCE)[1] == favoured


BAD_EVENTS: list[tuple[str | bytes, str, str | None, str]] = [  # (message, code, param, words)
    ("not json", "bad_message", None, "JSON"),
    ("[1, 2]", "bad_message", None, "objects"),
    ('{"event_id": "e1"}', "bad_message", "type", "input_audio_buffer.append"),
    ('{"type": "input_audio_buffer.resize", "event_id": "e1"}', "bad_message", "type", "unknown"),
    ('{"type": "response.create", "event_id": "e1"}', "unsupported", "type", "conversation"),
    (b"\x00\x01" * 800, "bad_message", None, "base64"),
    (
        '{"type": "input_audio_buffer.append", "audio": "%%%", "event_id": "e1"}',
        "bad_audio",
        "audio",
        "base64",
    ),
    (
        '{"type": "input_audio_buffer.append", "audio": "AAAA", "event_id": "e1"}',  # 3 bytes
        "bad_audio",
        "audio",
        "whole 2-byte samples",
    ),
    (
        '{"type": "input_audio_buffer.commit", "event_id": "e1"}',
        "input_audio_buffer_commit_empty",
        None,
        "append",
    ),
    (
        '{"type": "input_audio_buffer.append", "event_id": "e1"}',
        "bad_message",
        "audio",
        "required",
    ),
]
BAD_SESSIONS: list[tuple[dict[str, Any], str, str]] = [  # (session, param, words)
    ({"type": "realtime"}, "session.type", "transcription sessions only"),
    ({}, "session.type", "transcription sessions only"),
    (
        {"type": "transcription", "instructions": "be brief"},
        "session.instructions",
        "GA Realtime shape",
    ),
    (
        {"type": "transcription", "audio": {"input": {"transcription": {"language": "fr"}}}},
        "session.audio.input.transcription.language",
        "English only",
    ),
    (
        {"type": "transcription", "audio": {"input": {"format": {"type": "audio/mp3"}}}},
        "session.audio.input.format",
        "audio/pcm",
    ),
    (
        {
            "type": "transcription",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}},
        },
        "session.audio.input.format.audio/pcm.rate",
        "24000",
    ),
    (
        {"type": "transcription", "audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}},
        "session.audio.input.turn_detection.type",
        "server_vad",
    ),
    (
        {"type": "transcription", "include": ["item.input_audio_transcription.words"]},
        "session.include.0",
        "logprobs",
    ),
]


def test_bad_events_get_openai_errors_and_the_session_goes_on(server: Running, said: str) -> None:
    before = errors_counted(server, "bad_config")
    with open_realtime(server) as ws:
        for message, code, param, words in BAD_EVENTS:
            ws.send(message)
            event_id = "e1" if isinstance(message, str) and '"e1"' in message else None
            assert words in assert_openai_error(receive(ws), code, param, event_id), message
        for session, param, words in BAD_SESSIONS:
            send(ws, "session.update", session=session, event_id="e2")
            assert words in assert_openai_error(receive(ws), "bad_config", param, "e2"), session
        assert manual(ws)["audio"]["input"]["turn_detection"] is None  # still open, still served
        assert transcribe(ws, UTTERANCE)[1] == said
    assert errors_counted(server, "bad_config") == before + len(BAD_SESSIONS)


def test_server_vad_ends_each_turn_where_v1_stream_ends_a_segment() -> None:
    """Real speech (espeak-ng) and the bundled model: a pause ends a turn with
    speech_stopped, committed and completed, as /v1/stream's `endpoint_ms` ends a segment
    with a final, with the same text."""
    pause = np.zeros(24000, np.float32)
    first, second = speak("the weather is nice today"), speak("we will go for a long walk")
    audio = np.concatenate([pause[:4000], first, pause, second, pause[:16000]])
    pause_at, pause_end = (4000 + len(first)) / 16, (4000 + len(first) + len(pause)) / 16  # ms
    pcm = resample_pcm(audio, 24000)
    config = ServerConfig(
        dtype="fp32", bundle=DEFAULT_BUNDLE, ensemble=False, decoder_processes=False, warmup="first"
    )
    with running(config) as r:
        with connect(f"{r.ws}/v1/stream") as ws:
            written = {"sample_rate": 24000, "endpoint_ms": 500, "punctuate": True}  # as Realtime
            ws.send(json.dumps({"type": "config", **written}))
            for i in range(0, len(pcm), 4800):
                ws.send(pcm[i : i + 4800])
            ws.send(json.dumps({"type": "eos"}))
            finals = [m["text"] for m in map(json.loads, ws) if m["type"] == "final"]
        with open_realtime(r) as ws:
            vad = {"type": "server_vad", "silence_duration_ms": 500, "prefix_padding_ms": 200}
            update(ws, turn_detection=vad)
            receive(ws)
            append(ws, pcm)
            events = until(ws, COMPLETED, 2)
    segments = [f for f in finals if f]
    assert len(segments) == 2, finals
    ids = [e["item_id"] for e in events if e["type"] == COMPLETED]
    items = [[e for e in events if e.get("item_id") == item] for item in ids]
    for item, text in zip(items, segments, strict=True):
        steps = [e["type"].rpartition(".")[2] for e in item if e["type"] != DELTA]
        assert steps == ["speech_started", "speech_stopped", "committed", "completed"], item
        assert item[-1]["transcript"] == text
        assert "".join(e["delta"] for e in item if e["type"] == DELTA) == text
    (start1, stop1), (start2, stop2) = (
        [next(e[k] for e in item if k in e) for k in ("audio_start_ms", "audio_end_ms")]
        for item in items
    )
    assert 0 <= start1 < pause_at < stop1 < pause_end <= start2 + 300 < stop2 <= len(audio) / 16
    committed = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    assert [c["previous_item_id"] for c in committed] == [None, ids[0]]


# -- limits ------------------------------------------------------------------------------


def closing_error(ws: ClientConnection) -> dict[str, Any]:
    """The error event the server sent before it closed (every event before it skipped)."""
    events = []
    with suppress(ConnectionClosed):
        while True:
            events.append(receive(ws))
    assert events and events[-1]["type"] == "error", events
    return events[-1]


def test_an_oversize_message_is_explained_in_openai_shape_before_close_1009(
    server: Running,
) -> None:
    with open_realtime(server) as ws:
        with suppress(ConnectionClosed):
            send(ws, "input_audio_buffer.append", audio="A" * MAX_FRAME_BYTES)
        error = closing_error(ws)
    assert error["error"]["code"] == "frame_too_large" and ws.close_code == 1009
    assert_nothing_held(server)


def test_limits_end_the_connection_with_an_openai_error_and_a_close_code(server: Running) -> None:
    with connect(f"{server.ws}/v1/realtime?intent=conversation") as ws:
        error = closing_error(ws)
    assert error["error"]["code"] == "unsupported" and ws.close_code == 1008
    assert "intent=transcription" in error["error"]["message"]
    with open_realtime(server) as ws:  # the server allows 3 s a stream
        manual(ws)
        with suppress(ConnectionClosed):
            append(ws, resample_pcm(make_audio(4.0), 24000))
        error = closing_error(ws)
    assert error["error"]["code"] == "too_long" and ws.close_code == 1009
    slots = server.resources.slots
    with ExitStack() as stack:
        for _ in range(slots.limit):
            stack.enter_context(open_realtime(server))
        with connect(f"{server.ws}{PATH}") as ws:
            error = closing_error(ws)
        assert error["error"]["type"] == "server_error" and ws.close_code == 1013
        assert error["error"]["code"] == "overloaded"
    assert_nothing_held(server)


@pytest.fixture(scope="module")
def guarded(tiny_bundle: Path) -> Iterator[Running]:
    config = ServerConfig(
        dtype="fp32", bundle=str(tiny_bundle), auth_tokens=frozenset({"s3cret"}), idle_timeout_s=0.5
    )
    with running(config) as r:
        yield r


def test_the_api_key_is_checked_and_an_idle_session_is_closed(
    guarded: Running, tiny_bundle: Path
) -> None:
    with connect(f"{guarded.ws}{PATH}") as ws:
        error = closing_error(ws)
    assert error["error"]["code"] == "unauthorized" and ws.close_code == 1008
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="s3cret", max_retries=0)
    with client.realtime.connect(model="x", extra_query={"intent": "transcription"}) as rt:
        assert rt.recv().type == "session.created"  # the key was taken
        idle = rt.recv()  # nothing sent for 0.5 s
        assert isinstance(idle, sdk.RealtimeErrorEvent) and idle.error.code == "idle_timeout"
    with open_realtime(guarded, f"{PATH}&token=s3cret") as ws:  # as browsers pass it
        error = closing_error(ws)
    assert error["error"]["code"] == "idle_timeout" and ws.close_code == 1001


# -- faults ------------------------------------------------------------------------------


def test_a_failed_model_batch_fails_the_item_and_the_next_item_is_heard(
    server: Running, said: str
) -> None:
    dispatcher = server.resources.engine.dispatcher
    real, failing = dispatcher.runner, FailNewStream(dispatcher.runner)
    dispatcher.runner = failing
    try:
        with open_realtime(server) as ws:
            manual(ws)
            failing.armed = True
            append(ws, UTTERANCE[:9600], step=9600)  # one event: its first step fails
            failed = until(ws, "conversation.item.input_audio_transcription.failed")[-1]
            assert failed["error"]["code"] == "model_error" and failed["item_id"].startswith(
                "item_"
            )
            assert failing.failed and not failing.armed
            assert transcribe(ws, UTTERANCE)[1] == said  # a new Session, from scratch
    finally:
        dispatcher.runner = real
    assert_nothing_held(server)


def streams_counted(server: Running) -> float:
    """The server's `harken_streams_total` for /v1/realtime."""
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith('harken_streams_total{endpoint="realtime"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_client_vanishing_mid_item_disturbs_no_other_stream(server: Running, said: str) -> None:
    res = server.resources
    served = streams_counted(server)
    with open_realtime(server) as steady, open_realtime(server) as vanishing:
        manual(steady)
        manual(vanishing)
        append(steady, UTTERANCE[:24000])
        append(vanishing, UTTERANCE[:36000])
        eventually(lambda: res.engine.dispatcher.active_streams == 2)
        vanishing.socket.shutdown(socket.SHUT_RDWR)  # no close handshake: the client is gone
        vanishing.socket.close()
        append(steady, UTTERANCE[24000:])
        send(steady, "input_audio_buffer.commit")
        assert until(steady, COMPLETED)[-1]["transcript"] == said
    assert_nothing_held(server)
    assert streams_counted(server) == served + 2  # a client that left mid-item ended a stream


# -- fuzzed input -------------------------------------------------------------------------

FORMATS = st.sampled_from(
    [{"type": "audio/pcm", "rate": 24000}, {"type": "audio/pcmu"}, {"type": "audio/pcma"}]
)
SESSIONS = st.fixed_dictionaries(
    {"type": st.sampled_from(["transcription", "transcription", "realtime"])},
    optional={
        "audio": st.fixed_dictionaries(
            {},
            optional={
                "input": st.fixed_dictionaries(
                    {},
                    optional={
                        "format": st.one_of(FORMATS, JSON_VALUES),
                        "turn_detection": st.one_of(
                            st.none(),
                            st.builds(
                                lambda ms: {"type": "server_vad", "silence_duration_ms": ms},
                                st.integers(-1, 20000),
                            ),
                            JSON_VALUES,
                        ),
                        "transcription": st.fixed_dictionaries(
                            {},
                            optional={
                                "language": st.sampled_from(["en", "fr", None, ""]),
                                "prompt": st.text(max_size=40),
                                "keywords": st.lists(st.text(max_size=10), max_size=3),
                            },
                        ),
                    },
                )
            },
        ),
        "include": st.one_of(st.just([LOGPROBS]), JSON_VALUES),
    },
)
SPEECH = st.tuples(st.integers(0, len(UTTERANCE) // 2), st.integers(600, 6000)).map(
    lambda s: UTTERANCE[2 * s[0] : 2 * (s[0] + s[1])]
)
EVENTS = st.one_of(
    SESSIONS.map(lambda s: {"type": "session.update", "session": s}),
    st.one_of(SPEECH, FRAMES).map(
        lambda b: {"type": "input_audio_buffer.append", "audio": base64.b64encode(b).decode()}
    ),
    st.sampled_from([{"type": "input_audio_buffer.commit"}, {"type": "input_audio_buffer.clear"}]),
    st.dictionaries(st.sampled_from(["type", "audio", "session", "event_id"]), JSON_VALUES),
)
MESSAGES = st.one_of(EVENTS.map(json.dumps), ANY_TEXT, FRAMES)


@settings(max_examples=200, deadline=None)
@given(st.one_of(EVENTS.map(json.dumps), ANY_TEXT))
def test_any_text_is_an_event_or_an_error_that_says_why(text: str) -> None:
    try:
        parsed = parse_event(text)
    except EventError as e:
        event(e.code)
        assert e.code in ("bad_message", "bad_config", "unsupported") and len(e.message) > 10
        e.message.encode()  # sent as UTF-8 text
        return
    event(parsed.type)
    data = json.loads(text)
    assert isinstance(data, dict) and data["type"] == parsed.type


def test_random_events_leave_the_server_serving_and_holding_nothing(
    server: Running, said: str
) -> None:
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(MESSAGES, max_size=6))
    def one_session(messages: list[str | bytes]) -> None:
        replies: list[dict[str, Any]] = []
        # a limit may end the session early (a stream over 3 s)
        with connect(f"{server.ws}{PATH}", close_timeout=5) as ws, suppress(ConnectionClosed):
            for message in messages:
                ws.send(message)
            send(ws, "input_audio_buffer.clear", event_id="end")  # answered last
            while not replies or replies[-1]["type"] != "input_audio_buffer.cleared":
                replies.append(receive(ws))
        for reply in replies:
            if reply["type"] == "error":
                assert reply["error"]["message"] and reply["error"]["type"], reply
        if ws.close_code not in (None, 1000):
            assert replies[-1]["type"] == "error", replies
            event(f"closed {ws.close_code} {replies[-1]['error']['code']}")
        assert_nothing_held(server)

    with server_errors() as errors:
        one_session()
        with open_realtime(server) as ws:
            manual(ws)
            assert transcribe(ws, UTTERANCE)[1] == said
    assert not errors, [r.getMessage() for r in errors]
    assert_nothing_held(server)
