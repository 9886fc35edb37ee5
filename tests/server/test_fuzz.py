"""Fuzzed input never crashes (DESIGN principle 12, issue 19): every client message, audio
frame and upload either works or gets the project's own clear error, bounded for CI.

The pure functions (message parsers, PCM frames, the resampler, file decoding) take most of
the examples; two end-to-end tests then fuzz a running server over WebSocket and REST and
check that it still transcribes correctly and holds nothing afterwards. Each bug the fuzzing
found keeps a plain regression test with its exact input (`test_regression_*`).
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import math
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import soundfile
import soxr
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from models.config import FeatureConfig
from models.features import featurize
from server import audio as server_audio
from server.audio import (
    MAX_FILE_PEAK,
    SAMPLE_WIDTH,
    AudioError,
    Resampler,
    decode_blocks,
    decode_file,
)
from server.errors import BadAudio, ClientError
from server.protocol import (
    MAX_JSON_DEPTH,
    MAX_RATE,
    MIN_RATE,
    ProtocolError,
    VoskConfig,
    json_depth,
    parse_control,
    parse_stream_config,
    parse_vosk_text,
)
from server.transport import audio_frame
from tests.server.serving import (
    AUDIO_PCM,
    Running,
    assert_nothing_held,
    make_audio,
    receive_all,
)
from tests.server.test_bad_input import CONFIG, EOS, openai_error, post, ws_error

F32 = npt.NDArray[np.float32]
RATE = 16000  # the model's rate, what decode_file is asked for
FAST = settings(max_examples=200, deadline=None)  # pure functions, microseconds each
ENCODINGS = ("pcm_s16le", "f32le")
# how files start that clients send as raw frames by mistake: WAV, FLAC, Ogg, MP3 with an
# ID3v2.2-2.4 tag (as ffmpeg and most taggers write them), Matroska/WebM
CONTAINERS = (b"RIFF", b"fLaC", b"OggS", b"ID3\x02", b"ID3\x03", b"ID3\x04", b"\x1aE\xdf\xa3")

# -- strategies ------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and +-Infinity included: Python's json writes and reads them
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
# valid JSON that Python's json module cannot read: digits past its int limit, deep nesting
HOSTILE_JSON = st.one_of(
    st.integers(4301, 6000).map(lambda n: "1" * n),
    st.integers(1000, 100_000).map(lambda n: "[" * n + "]" * n),
    st.integers(1000, 20_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
)
HOSTILE_IN_CONFIG = st.tuples(
    st.sampled_from(["sample_rate", "n_best", "hotwords"]), HOSTILE_JSON
).map(lambda kv: f'{{"type": "config", "sample_rate": 16000, "{kv[0]}": {kv[1]}}}')
VALID_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "sample_rate": st.integers(MIN_RATE, MAX_RATE),
    "encoding": st.sampled_from(ENCODINGS),
    "partials": st.booleans(),
    "n_best": st.integers(1, 10),
    "word_timestamps": st.booleans(),
    "hotwords": st.lists(st.text(min_size=1, max_size=64), max_size=5),
    "endpoint_ms": st.integers(0, 10_000),
    "punctuate": st.booleans(),
}
NEAR_MISSES: dict[str, st.SearchStrategy[Any]] = {  # just outside what is allowed
    "sample_rate": st.sampled_from([MIN_RATE - 1, MAX_RATE + 1, 0, -16000, 16000.5, "16 kHz"]),
    "encoding": st.sampled_from(["PCM_S16LE", "mp3", "s16le", ""]),
    "partials": st.sampled_from(["sometimes", 2, [], {}]),
    "n_best": st.sampled_from([0, 11, -1, 1.5, "best"]),
    "word_timestamps": st.sampled_from(["words", 0.5, None]),
    "hotwords": st.one_of(
        st.sampled_from([[""], ["x" * 65], "harken", [1], [None]]),
        st.lists(st.just("harken"), min_size=101, max_size=102),
    ),
    "endpoint_ms": st.sampled_from([-1, 10_001, 0.5, "500"]),
    "punctuate": st.sampled_from(["sometimes", 2, [], {}]),
}


def mostly(
    valid: st.SearchStrategy[Any], *wrong: st.SearchStrategy[Any], odds: int = 3
) -> st.SearchStrategy[Any]:
    """`valid` `odds` times to one of `wrong` (st.one_of would merge repeated branches)."""
    return st.integers(0, odds).flatmap(lambda i: valid if i < odds else st.one_of(*wrong))


STREAM_FIELDS = {  # mostly valid, so that whole configs often are
    key: mostly(valid, NEAR_MISSES[key], JSON_VALUES) for key, valid in VALID_FIELDS.items()
}


def _config(parts: tuple[dict[str, Any], dict[str, Any], bool]) -> dict[str, Any]:
    fields, unknown, no_rate = parts
    return {**unknown, **{k: v for k, v in fields.items() if not (no_rate and k == "sample_rate")}}


STREAM_CONFIGS = st.tuples(
    st.fixed_dictionaries(
        {
            "type": mostly(st.just("config"), JSON_VALUES),
            "sample_rate": STREAM_FIELDS["sample_rate"],
        },
        optional={k: v for k, v in STREAM_FIELDS.items() if k != "sample_rate"},
    ),
    mostly(st.just({}), st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=2)),
    mostly(st.just(False), st.just(True)),  # sample_rate left out
).map(_config)
VALID_STREAM_CONFIGS = st.fixed_dictionaries(
    {"type": st.just("config"), "sample_rate": VALID_FIELDS["sample_rate"]},
    optional={k: v for k, v in VALID_FIELDS.items() if k != "sample_rate"},
)
ANY_TEXT = st.one_of(st.text(max_size=40), JSON_VALUES.map(json.dumps), HOSTILE_JSON)

# f32 bit patterns that break naive decoders: quiet, signalling and negative NaNs with
# payloads, +-inf, the largest float, a subnormal
F32_PATTERNS: tuple[int, ...] = (0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF)
F32_PATTERNS += (0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x00000001)
F32_SAMPLES = st.one_of(
    st.floats(-1, 1, width=32).map(lambda x: struct.pack("<f", x)),
    st.floats(width=32).map(lambda x: struct.pack("<f", x)),
    st.integers(0, 2**32 - 1).map(lambda bits: struct.pack("<I", bits)),
    st.sampled_from(F32_PATTERNS).map(lambda bits: struct.pack("<I", bits)),
)
S16_SAMPLES = st.integers(-(2**15), 2**15 - 1).map(lambda v: struct.pack("<h", v))
FRAME_BODIES = st.one_of(
    st.binary(max_size=256),
    st.lists(F32_SAMPLES, max_size=64).map(b"".join),
    st.lists(S16_SAMPLES, max_size=64).map(b"".join),
    st.tuples(st.sampled_from(CONTAINERS), st.binary(max_size=64)).map(b"".join),
)
FRAMES = st.tuples(FRAME_BODIES, st.binary(max_size=3)).map(b"".join)  # maybe odd trailing bytes


def expected_code(value: Any, wanted_type: str) -> str:
    """The ProtocolError code a message must get, from what the client sent."""
    if not isinstance(value, dict):
        return "bad_message"
    return "out_of_order" if value.get("type") != wanted_type else "bad_config"


_NOT_JSON = object()


def loads(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON
    return _NOT_JSON if json_depth(value) > MAX_JSON_DEPTH else value


def assert_clear(error: ProtocolError, code: str) -> None:
    """The error the client gets: the expected code, a message that goes on the wire."""
    assert error.code == code, (error.code, str(error))
    assert len(str(error)) > 10
    str(error).encode()  # sent as UTF-8 text; a lone surrogate would fail here


# -- /v1/stream and /vosk messages -------------------------------------------------------------


@FAST
@given(st.one_of(STREAM_CONFIGS.map(json.dumps), ANY_TEXT, HOSTILE_IN_CONFIG))
def test_a_stream_config_is_valid_or_refused_with_the_right_code(text: str) -> None:
    value = loads(text)
    try:
        config = parse_stream_config(text)
    except ProtocolError as e:
        event(e.code)
        assert_clear(e, expected_code(value, "config"))
        if e.code == "bad_config":  # `field: what is wrong`, first the field to change
            fields = [k for k in [*value, *STREAM_FIELDS, "message"] if k]
            assert any(str(e).startswith(f"{k}") for k in fields), str(e)
        return
    event("valid")
    assert isinstance(value, dict) and value["type"] == "config"
    assert set(value) <= {"type", *STREAM_FIELDS}, "unknown keys are refused"
    assert type(config.sample_rate) is int and MIN_RATE <= config.sample_rate <= MAX_RATE
    assert config.encoding in ENCODINGS
    assert type(config.partials) is bool and type(config.word_timestamps) is bool
    assert type(config.punctuate) is bool
    assert type(config.n_best) is int and 1 <= config.n_best <= 10
    assert type(config.endpoint_ms) is int and 0 <= config.endpoint_ms <= 10_000
    assert len(config.hotwords) <= 100
    assert all(type(h) is str and 1 <= len(h) <= 64 for h in config.hotwords)


@FAST
@given(VALID_STREAM_CONFIGS, st.sampled_from([None, 1, 4]))
def test_every_valid_stream_config_is_taken_as_sent(
    sent: dict[str, Any], indent: int | None
) -> None:
    config = parse_stream_config(json.dumps(sent, indent=indent))
    for key, value in sent.items():
        assert getattr(config, key) == value


@FAST
@given(
    st.one_of(
        ANY_TEXT,
        st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=2)
        .map(lambda extra: {**extra, "type": "eos"})
        .map(json.dumps),
    )
)
@example('{"a":' * 1988 + "1" + "}" * 1988)  # found here: json's depth limit moved with the stack
def test_after_the_config_only_eos_is_taken(text: str) -> None:
    value = loads(text)
    try:
        parse_control(text)
    except ProtocolError as e:
        assert_clear(e, expected_code(value, "eos"))
        return
    assert value == {"type": "eos"}


VOSK_CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "sample_rate": st.one_of(st.floats(), st.integers(0, 100_000), JSON_VALUES),
        "words": JSON_VALUES,
        "max_alternatives": st.one_of(st.integers(-2, 10), JSON_VALUES),
        "phrase_list": st.one_of(st.lists(st.text(max_size=70), max_size=3), JSON_VALUES),
        "model": JSON_VALUES,  # ignored, as Vosk does
        "punctuate": JSON_VALUES,
    },
)
VOSK_MESSAGES = st.one_of(
    st.builds(lambda c: {"config": c}, st.one_of(VOSK_CONFIGS, JSON_VALUES)),
    st.builds(lambda k, v: {k: v}, st.sampled_from(["eof", "reset"]), JSON_VALUES),
).map(json.dumps)


@FAST
@given(st.one_of(VOSK_MESSAGES, ANY_TEXT))
def test_a_vosk_message_is_a_command_a_valid_config_or_refused(text: str) -> None:
    value = loads(text)
    try:
        parsed = parse_vosk_text(text)
    except ProtocolError as e:
        config_is_object = isinstance(value, dict) and isinstance(value.get("config"), dict)
        assert_clear(e, "bad_config" if config_is_object else "bad_message")
        return
    assert isinstance(value, dict)
    if "eof" in value or "reset" in value:
        assert parsed == ("eof" if "eof" in value else "reset")
        return
    assert isinstance(parsed, VoskConfig)
    assert math.isfinite(parsed.sample_rate) and MIN_RATE <= parsed.sample_rate <= MAX_RATE
    assert type(parsed.words) is bool and type(parsed.max_alternatives) is int
    assert type(parsed.punctuate) is bool
    assert parsed.max_alternatives >= 0 and len(parsed.phrase_list) <= 100


HOSTILE_EXAMPLES = [
    "1" * 5000,
    "[" * 100_000,
    '{"type": "config", "sample_rate": 1' + "0" * 5000 + "}",
]


@pytest.mark.parametrize("text", HOSTILE_EXAMPLES, ids=["long_int", "deep", "long_rate"])
@pytest.mark.parametrize("parse", [parse_stream_config, parse_control, parse_vosk_text])
def test_regression_json_past_pythons_limits_is_a_bad_message(
    text: str, parse: Callable[[str], object]
) -> None:
    """Found by the fuzzing: json.loads raised ValueError (over 4300 digits) and
    RecursionError (nesting), which escaped the route: the socket dropped with 1006."""
    with pytest.raises(ProtocolError, match="small JSON objects") as caught:
        parse(text)
    assert caught.value.code == "bad_message"


# -- binary frames -------------------------------------------------------------------------


@FAST
@given(st.sampled_from(ENCODINGS), FRAMES)
def test_a_frame_decodes_to_the_samples_it_holds_or_is_refused_as_bad_audio(
    encoding: str, frame: bytes
) -> None:
    width = SAMPLE_WIDTH[encoding]
    n = len(frame) // width
    values = struct.unpack(f"<{n}{'h' if encoding == 'pcm_s16le' else 'f'}", frame[: n * width])
    try:
        samples = audio_frame(frame, encoding)
    except BadAudio as e:
        event(f"{encoding} refused")
        assert e.ws_close == 1003
        if len(frame) % width:  # a partial sample at the end: refused, never guessed at
            assert f"whole {width}-byte samples" in e.message
        elif frame.startswith(CONTAINERS):
            assert "audio file" in e.message
        else:
            assert encoding == "f32le" and "finite" in e.message
            assert not all(math.isfinite(v) and abs(v) <= 4.0 for v in values)
        return
    event(f"{encoding} decoded")
    assert len(frame) % width == 0 and not frame.startswith(CONTAINERS)
    assert samples.dtype == np.float32 and samples.shape == (n,)
    assert np.all(np.isfinite(samples))
    if encoding == "pcm_s16le":
        np.testing.assert_array_equal(samples, np.asarray(values, np.float32) / 32768)
        assert np.all(np.abs(samples) <= 1.0)
    else:
        np.testing.assert_array_equal(samples, np.asarray(values, np.float32))
        assert np.all(np.abs(samples) <= 4.0)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_regression_an_mp3_sent_as_raw_frames_is_refused_as_an_audio_file(encoding: str) -> None:
    """Found by the fuzzing: the MP3 signature was b"ID3", compared with a frame's first four
    bytes, so no MP3 ever matched and ffmpeg's MP3s streamed as noise. The input: the
    first 12 bytes of `ffmpeg -f lavfi -i sine=d=0.1 -f mp3 -`."""
    with pytest.raises(BadAudio, match="this is an audio file"):
        audio_frame(b"ID3\x04\x00\x00\x00\x00\x00#TS", encoding)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(MIN_RATE, MAX_RATE),
    st.binary(max_size=6000),
    st.lists(st.integers(0, 3000), max_size=8),
)
def test_any_client_rate_and_chunking_resamples_to_finite_audio_as_in_one_go(
    rate: int, data: bytes, cuts: list[int]
) -> None:
    samples = audio_frame(b"\x00\x00" + data[: len(data) // 2 * 2], "pcm_s16le")  # no magic
    whole = Resampler(rate, RATE).push(samples, last=True)
    stream, parts = Resampler(rate, RATE), []
    bounds = [0, *sorted(c for c in cuts if c < len(samples)), len(samples)]
    for a, b in itertools.pairwise(bounds):
        parts.append(stream.push(samples[a:b]))
    parts.append(stream.push(samples[:0], last=True))
    chunked = np.concatenate(parts)
    assert chunked.dtype == np.float32 and np.all(np.isfinite(chunked))
    np.testing.assert_array_equal(chunked, whole)
    assert abs(len(whole) - len(samples) * RATE / rate) <= 1


# -- uploaded files --------------------------------------------------------------------------


def encode(audio: npt.NDArray[Any], fmt: str, subtype: str) -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, audio, RATE, format=fmt, subtype=subtype)
    return buf.getvalue()


SINE = (0.3 * np.sin(2 * np.pi * 440 * np.arange(1600) / RATE)).astype(np.float32)
WAV = encode(SINE, "WAV", "PCM_16")
FORMATS = {
    "wav": ("WAV", "PCM_16"),
    "wav_float": ("WAV", "FLOAT"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "ogg": ("OGG", "VORBIS"),
}


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    """0.1 s of a 440 Hz sine in each container, each decoding back to that sine."""
    files = {name: encode(SINE, *kind) for name, kind in FORMATS.items()}
    for name, data in files.items():
        audio = decode_file(data, RATE)
        n = min(len(audio), len(SINE))
        assert abs(len(audio) - len(SINE)) <= 1152, name  # an MP3 frame of padding at most
        assert np.corrcoef(audio[:n], SINE[:n])[0, 1] > 0.9 or name == "mp3", name
        assert np.abs(audio).max() == pytest.approx(0.3, abs=0.05), name
    return files


# overwrite a header field with an extreme value: counts, rates, sizes, channel numbers
EXTREMES = (0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
FIELD_VALUES = st.tuples(st.sampled_from(EXTREMES), st.sampled_from("<>")).map(
    lambda v: struct.pack(v[1] + "I", v[0])
)
MUTATIONS = st.one_of(
    st.tuples(st.just("byte"), st.integers(0, 127), st.integers(0, 255)),
    st.tuples(st.just("bit"), st.integers(0, 127), st.integers(0, 7)),
    st.tuples(st.just("field"), st.integers(0, 124), FIELD_VALUES),
    st.tuples(st.just("cut"), st.integers(0, 4000), st.just(0)),
    st.tuples(st.just("prepend"), st.binary(min_size=1, max_size=64), st.just(0)),
)


def mutate(data: bytes, ops: list[tuple[str, Any, Any]]) -> bytes:
    out = bytearray(data)
    for op, a, b in ops:
        if op == "cut":
            out = out[:a]
        elif op == "prepend":
            out = bytearray(a) + out
        elif a < len(out):
            if op == "byte":
                out[a] = b
            elif op == "bit":
                out[a] ^= 1 << b
            else:
                out[a : a + 4] = b[: len(out) - a]
    return bytes(out)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.lists(MUTATIONS, min_size=1, max_size=3))
def test_a_malformed_upload_decodes_to_usable_audio_or_a_clear_error(
    seeds: dict[str, bytes], name: str, ops: list[tuple[str, Any, Any]]
) -> None:
    """What `POST /v1/audio/transcriptions` decodes (libsndfile, else ffmpeg): audio the
    model can take, or an AudioError that the route turns into a 400 / 415."""
    data = mutate(seeds[name], ops)
    try:
        audio = decode_file(data, RATE)
    except AudioError as e:
        event(f"{name}: {e.code}")
        assert e.code in ("bad_audio", "unsupported_format") and len(str(e)) > 10
        return
    event(f"{name}: decoded")
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert np.all(np.isfinite(audio)) and (len(audio) == 0 or np.abs(audio).max() <= MAX_FILE_PEAK)


@settings(max_examples=50, deadline=None)
@given(st.integers(44, len(WAV)))
def test_a_truncated_wav_decodes_to_the_samples_it_still_holds(cut: int) -> None:
    whole = decode_file(WAV, RATE)
    np.testing.assert_array_equal(decode_file(WAV[:cut], RATE), whole[: (cut - 44) // 2])


def flac_claiming_2_34_more_frames() -> bytes:
    """The 0.1 s FLAC with bit 34 of STREAMINFO's 36-bit sample count set (bytes 18-25 hold
    rate, channels, bits and that count, big-endian)."""
    flac = bytearray(encode(SINE, "FLAC", "PCM_16"))
    assert int.from_bytes(flac[18:26], "big") & (2**36 - 1) == len(SINE)
    flac[21] |= 0x04
    assert int.from_bytes(flac[18:26], "big") & (2**36 - 1) == 2**34 + len(SINE)
    return bytes(flac)


def test_regression_flac_headers_claiming_billions_of_frames_decode_what_is_there() -> None:
    """Found by the fuzzing: soundfile.read trusts the header's frame count and asked numpy
    for 64 GiB (bit 34 set) or 256 GiB (the second input, hypothesis' own) at once: a
    MemoryError, a 500 from a 1 kB upload."""
    audio = decode_file(flac_claiming_2_34_more_frames(), RATE)
    np.testing.assert_array_equal(audio, decode_file(encode(SINE, "FLAC", "PCM_16"), RATE))
    rewritten = mutate(encode(SINE, "FLAC", "PCM_16"), [("field", 19, b"\x00\x00\xff\xff")])
    assert len(decode_file(rewritten, RATE)) == len(SINE)


def wav_at_1_hz() -> bytes:
    """A 3 kB WAV whose header says 1 Hz: 1,500 samples are 25 minutes of audio."""
    buf = io.BytesIO()
    soundfile.write(buf, np.zeros(1500, np.float32), 1, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def long_silent_flac(seconds: float) -> bytes:
    """FLAC compresses silence to almost nothing: a small upload of a long recording."""
    return encode(np.zeros(int(seconds * RATE), np.float32), "FLAC", "PCM_16")


@pytest.mark.parametrize("fmt", ["1 Hz WAV", "silent FLAC", "silent MP3"])
def test_regression_small_files_of_long_audio_stop_at_the_limit(fmt: str) -> None:
    """Found beside the fuzzing: a few kB that decode (or resample) to more audio than
    `max_stream_s` were decoded whole first; a 1 Hz header alone meant 16,000x resampling."""
    data = {
        "1 Hz WAV": wav_at_1_hz,
        "silent FLAC": lambda: long_silent_flac(30.0),
        "silent MP3": lambda: encode(np.zeros(30 * RATE, np.float32), "MP3", "MPEG_LAYER_III"),
    }[fmt]()
    assert len(data) < 100_000
    with pytest.raises(AudioError, match="more than the 10 s allowed") as caught:
        decode_file(data, RATE, max_seconds=10.0)
    assert caught.value.code == "too_long"
    assert len(decode_file(long_silent_flac(9.0), RATE, max_seconds=10.0)) == 9 * RATE


def ffmpeg_run(data: bytes, *args: str) -> bytes:
    """`data` through ffmpeg (stdin to stdout) with `args` before the output."""
    cmd = [shutil.which("ffmpeg") or "ffmpeg", "-loglevel", "error", "-i", "pipe:0", *args]
    return subprocess.run([*cmd, "pipe:1"], input=data, capture_output=True, check=True).stdout


@pytest.mark.parametrize("source", ["stereo 44.1 kHz WAV", "M4A upload", "M4A file"])
def test_a_file_decodes_in_blocks_that_join_to_it_decoded_whole(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file is decoded a block at a time, so that one of any length takes the memory of
    a block: the blocks are each at most a block long and join to what decoding it whole
    (libsndfile and one resampling, or one ffmpeg run for what libsndfile cannot read)
    gives."""
    monkeypatch.setattr(server_audio, "_READ_BLOCK", 8192)
    chirp = make_audio(3.0, rate=44100)
    stereo = np.stack([chirp, -0.5 * chirp], axis=1)
    buf = io.BytesIO()
    soundfile.write(buf, stereo, 44100, format="WAV", subtype="FLOAT")
    data: bytes | Path = buf.getvalue()
    whole = soxr.resample(stereo.mean(axis=1, dtype=np.float32), 44100, RATE)
    if source.startswith("M4A"):
        data = ffmpeg_run(buf.getvalue(), "-c:a", "aac", "-f", "adts")  # AAC: ffmpeg's only
        whole = np.frombuffer(ffmpeg_run(data, "-f", "f32le", "-ac", "1", "-ar", "16000"), "<f4")
        if source == "M4A file":
            (tmp_path / "a.aac").write_bytes(data)
            data = tmp_path / "a.aac"
    blocks = list(decode_blocks(data, RATE))
    assert len(blocks) >= 5 and max(len(b) for b in blocks) <= 8192
    np.testing.assert_array_equal(np.concatenate(blocks), whole)


def float_wav_with(value: float) -> bytes:
    audio = make_audio(0.5)
    audio[100:200] = value
    return encode(audio, "WAV", "FLOAT")


def float_wav_misread() -> bytes:
    """The fuzzing's input: the sine as a float WAV with its block align set to 90 (byte 32)
    and its PEAK chunk's name broken (byte 50), so that libsndfile refuses it and ffmpeg
    reads floats off their boundaries, up to 1.1e38."""
    wav = bytearray(encode(SINE, "WAV", "FLOAT"))
    assert (wav[32], bytes(wav[48:52])) == (4, b"PEAK")
    wav[32], wav[50] = 90, 131
    return bytes(wav)


@pytest.mark.parametrize(
    "data",
    [float_wav_misread(), *(float_wav_with(v) for v in (math.nan, math.inf, -math.inf, 1e38))],
    ids=["misread", "nan", "inf", "-inf", "1e38"],
)
def test_regression_float_samples_that_are_not_numbers_are_bad_audio(data: bytes) -> None:
    """Found by the fuzzing: 1e38 samples (and NaN, inf) reached the model, whose NaN
    outputs the decoder refused: a 500 (decoder_error) instead of a 400."""
    with pytest.raises(AudioError, match="NaN, infinite or over") as caught:
        decode_file(data, RATE)
    assert caught.value.code == "bad_audio"


def test_float_wavs_scaled_to_integer_ranges_still_decode_to_finite_features() -> None:
    """The refusal above stops short of files that are merely loud (float WAVs written with
    int16 or int32 sample values)."""
    for peak in (32767.0, MAX_FILE_PEAK):
        audio = make_audio(0.5)
        audio = (audio / np.abs(audio).max() * peak).astype(np.float32)
        decoded = decode_file(encode(audio, "WAV", "FLOAT"), RATE)
        assert np.abs(decoded).max() == pytest.approx(peak)
        assert np.all(np.isfinite(featurize(decoded, FeatureConfig(onset_gate=False))))


# -- end to end ------------------------------------------------------------------------------


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def server_errors() -> Iterator[list[logging.LogRecord]]:
    """What uvicorn logs when an exception escapes the app (a 500, a socket dropped)."""
    handler = _Keep()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


def client_errors() -> dict[str, int]:
    """Every client error's code and the close code it must come with."""
    found, todo = {}, [ClientError]
    while todo:
        kind = todo.pop()
        found[kind.code] = kind.ws_close
        todo.extend(kind.__subclasses__())
    return found


CLOSE_CODES = client_errors()
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz'", min_size=1, max_size=8)
WS_CONFIGS = st.fixed_dictionaries(  # configs a client means: the stream then goes on
    {"type": st.just("config"), "sample_rate": st.sampled_from([16000, 8000, 44100, 48000])},
    optional={
        "encoding": mostly(st.just("pcm_s16le"), st.just("f32le")),
        "partials": st.booleans(),
        "n_best": st.integers(1, 10),
        "word_timestamps": st.booleans(),
        "hotwords": st.lists(WORDS, max_size=3),
        "endpoint_ms": st.sampled_from([0, 100, 500]),
    },
).map(json.dumps)
WS_TEXT = st.one_of(st.just(EOS), STREAM_CONFIGS.map(json.dumps), ANY_TEXT)
SPEECH = st.tuples(st.integers(0, len(AUDIO_PCM) // 2), st.integers(800, 8000)).map(
    lambda s: AUDIO_PCM[2 * s[0] : 2 * (s[0] + s[1])]  # whole samples of the test utterance
)
WS_SEQUENCES = st.tuples(
    mostly(WS_CONFIGS, WS_TEXT, SPEECH, FRAMES),  # a config first, mostly
    st.lists(mostly(SPEECH, FRAMES, WS_TEXT, odds=6), max_size=5),  # then mostly audio
).map(lambda s: [s[0], *s[1]])


def test_random_websocket_messages_leave_the_server_serving_and_holding_nothing(
    server: Running, expected: str
) -> None:
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(WS_SEQUENCES, st.sampled_from(["eos", "eos", "leave"]))
    def one_stream(messages: list[str | bytes], ending: str) -> None:
        with connect(f"{server.ws}/v1/stream", close_timeout=5) as ws:
            with suppress(ConnectionClosed):  # the server may close before it read them all
                for message in messages:
                    ws.send(message)
                if ending == "eos":
                    ws.send(EOS)
            replies = []
            if ending == "eos":  # the server must answer and close; "leave" just goes
                with suppress(ConnectionClosed):
                    while True:
                        replies.append(json.loads(ws.recv(timeout=15)))
        assert all(r["type"] in ("partial", "final", "error") for r in replies), replies
        assert all(r["type"] != "error" for r in replies[:-1]), replies
        if ending == "eos":
            last = replies[-1] if replies else {"type": None}
            event(f"{last['type']} {last.get('code', '')}, close {ws.close_code}")
            if ws.close_code == 1000:
                assert last["type"] == "final" and isinstance(last["text"], str), replies
            else:
                assert last["type"] == "error" and last["message"], (ws.close_code, replies)
                assert CLOSE_CODES.get(last["code"]) == ws.close_code, (ws.close_code, last)
        assert_nothing_held(server)

    with server_errors() as errors:
        one_stream()
        for text in HOSTILE_EXAMPLES:  # the regression: these dropped the socket (1006)
            for sends in ((text,), (CONFIG, text)):  # as the config, as a control message
                error, close = ws_error(server, *sends)
                assert (error["code"], close) == ("bad_message", 1008), sends[-1][:20]
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(CONFIG)
            ws.send(AUDIO_PCM)
            ws.send(EOS)
            replies = receive_all(ws)
        assert (replies[-1]["type"], ws.close_code) == ("final", 1000), replies
        assert replies[-1]["text"] == expected
    assert not errors, [r.getMessage() for r in errors]
    assert_nothing_held(server)


def test_malformed_uploads_get_4xx_with_a_reason_and_a_good_file_still_transcribes(
    server: Running, expected: str
) -> None:
    ogg = encode(SINE, "OGG", "VORBIS")
    mp3 = encode(SINE, "MP3", "MPEG_LAYER_III")
    malformed = [  # (file name, upload, status, code)
        ("cut-in-header.wav", WAV[:30], 415, "unsupported_format"),
        ("no-channels.wav", WAV[:22] + b"\x00\x00" + WAV[24:], 415, "unsupported_format"),
        ("after-junk.ogg", b"\x00junk" + ogg, 415, "unsupported_format"),
        ("cut-short.ogg", ogg[:200], 415, "unsupported_format"),
        ("cut-short.mp3", mp3[:10], 415, "unsupported_format"),
        ("header-only.wav", WAV[:44], 400, "empty_audio"),
        ("nan.wav", float_wav_with(math.nan), 400, "bad_audio"),  # was a 500
        ("misread.wav", float_wav_misread(), 400, "bad_audio"),  # was a 500
        ("1hz.wav", wav_at_1_hz(), 413, "too_long"),  # 25 min at 1 Hz, past max_stream_s
    ]
    with server_errors() as errors:
        for name, data, status, code in malformed:
            error = openai_error(post(server, data, name=name), status)
            assert error["code"] == code and len(error["message"]) > 10, (name, error)
        # the FLAC whose header lies about its length (was a MemoryError, a 500) transcribes
        lying = post(server, flac_claiming_2_34_more_frames(), name="a.flac")
        assert lying.status_code == 200 and isinstance(lying.json()["text"], str), lying.text
        good = post(server, encode(np.frombuffer(AUDIO_PCM, "<i2"), "WAV", "PCM_16"))
        assert good.status_code == 200 and good.json()["text"] == expected, good.text
    assert not errors, [r.getMessage() for r in errors]
    assert_nothing_held(server)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 200, 5000])
def test_deeply_nested_messages_get_one_answer_at_any_depth(depth: int) -> None:
    """Deep nesting is refused as a bad message, whether or not json itself gives up on it."""
    text = '{"type": "eos", "x": ' + "[" * depth + "]" * depth + "}"
    for parse in (parse_control, parse_stream_config, parse_vosk_text):
        with pytest.raises(ProtocolError) as info:
            parse(text)
        assert_clear(info.value, "bad_message")
        assert f"nested at most {MAX_JSON_DEPTH} deep" in str(info.value)
