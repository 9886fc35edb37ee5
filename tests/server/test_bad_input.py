"""Every rule of issue 5's "limits and bad input": a clear error, and no harm to others."""

from __future__ import annotations

import argparse
import io
import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import openai
import pytest
import soundfile
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from server import cli_serve
from server.config import ServerConfig, from_args
from tests.server.serving import AUDIO_PCM, Running, eventually, pcm16, receive_all, running

CONFIG = json.dumps({"type": "config", "sample_rate": 16000})
EOS = json.dumps({"type": "eos"})


def error_of(ws: ClientConnection) -> tuple[dict[str, Any], int | None]:
    """The error message the server sent, and its close code."""
    messages = receive_all(ws)
    assert messages and messages[-1]["type"] == "error", messages
    return messages[-1], ws.close_code


def ws_error(
    server: Running, *sends: str | bytes, path: str = "/v1/stream"
) -> tuple[dict[str, Any], int | None]:
    with connect(f"{server.ws}{path}") as ws:
        with suppress(ConnectionClosed):  # the server may close before it has read everything
            for message in sends:
                ws.send(message)
        return error_of(ws)


def wav_bytes(audio: npt.NDArray[np.float32], rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, audio, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def post(server: Running, data: bytes, name: str = "a.wav", **form: str) -> httpx.Response:
    files = {"file": (name, data)}
    return httpx.post(
        f"{server.url}/v1/audio/transcriptions", files=files, data={"model": "x", **form}
    )


def openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


# -- the protocol ------------------------------------------------------------------------


def test_audio_before_config_is_out_of_order(server: Running) -> None:
    error, code = ws_error(server, AUDIO_PCM[:3200])
    assert (error["code"], code) == ("out_of_order", 1008)
    assert "config" in error["message"]


def test_a_second_config_is_out_of_order(server: Running) -> None:
    error, code = ws_error(server, CONFIG, CONFIG)
    assert (error["code"], code) == ("out_of_order", 1008)
    assert "eos" in error["message"]


@pytest.mark.parametrize(
    ("message", "code", "words"),
    [
        ("not json", "bad_message", "JSON"),
        ("[1, 2]", "bad_message", "objects"),
        (json.dumps({"type": "config", "sample_rate": 4000}), "bad_config", "sample_rate"),
        (json.dumps({"type": "config", "sample_rate": 96000}), "bad_config", "sample_rate"),
        (
            json.dumps({"type": "config", "sample_rate": 16000, "encoding": "mp3"}),
            "bad_config",
            "encoding",
        ),
        (json.dumps({"type": "config", "sample_rate": 16000, "n_best": 0}), "bad_config", "n_best"),
        (
            json.dumps({"type": "config", "sample_rate": 16000, "colour": "red"}),
            "bad_config",
            "colour",
        ),
        (
            json.dumps({"type": "config", "sample_rate": 16000, "adapt_speaker": "perhaps"}),
            "bad_config",
            "adapt_speaker",
        ),
    ],
)
def test_bad_config_messages_say_what_to_change(
    server: Running, message: str, code: str, words: str
) -> None:
    error, close = ws_error(server, message)
    assert (error["code"], close) == (code, 1008)
    assert words in error["message"]


def test_a_hotword_with_nothing_to_spell_is_left_out_and_the_stream_goes_on(
    server: Running, expected: str
) -> None:
    """Names as people write them are normalised as transcripts are ("Dr. Smith", "R2D2",
    "h\u00e9llo"); an entry with nothing left to spell is named in a warning, and only it
    is left out."""
    hotwords = ["Dr. Smith", "R2D2", "h\u00e9llo", "?!", "\U0001f642"]
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 16000, "hotwords": hotwords}))
        ws.send(AUDIO_PCM)
        ws.send(EOS)
        messages = receive_all(ws)
        close = ws.close_code
    warnings = [m for m in messages if m["type"] == "warning"]
    assert [w["code"] for w in warnings] == ["hotword_refused"] * 2
    assert "'?!'" in warnings[0]["message"] and "'\U0001f642'" in warnings[1]["message"]
    assert messages[-1]["type"] == "final" and close == 1000
    # the rest are favoured as normalised: the tiny model spells a boosted "hello" at once
    assert "hello" in messages[-1]["text"].split() and "hello" not in expected.split()


@pytest.mark.parametrize(
    ("frame", "config", "words"),
    [
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", CONFIG, "audio file"),
        (b"\x01\x02\x03", CONFIG, "whole 2-byte samples"),
        (
            b"\xff\xff\xff\x7f" * 100,
            json.dumps({"type": "config", "sample_rate": 16000, "encoding": "f32le"}),
            "finite",
        ),
    ],
)
def test_non_audio_bytes_are_refused(
    server: Running, frame: bytes, config: str, words: str
) -> None:
    error, code = ws_error(server, config, frame)
    assert (error["code"], code) == ("bad_audio", 1003)
    assert words in error["message"]


def test_eos_without_audio_is_empty_audio(server: Running) -> None:
    error, code = ws_error(server, CONFIG, EOS)
    assert (error["code"], code) == ("empty_audio", 1008)


def test_a_stream_over_the_length_limit_is_closed(server: Running) -> None:
    four_seconds = b"\x00\x01" * 16000 * 4  # the server allows 3 s
    error, code = ws_error(server, CONFIG, four_seconds)
    assert (error["code"], code) == ("too_long", 1009)


def test_vosk_bad_sample_rate_closes_with_a_reason(server: Running) -> None:
    with connect(f"{server.ws}/vosk") as ws:
        ws.send('{"config": {"sample_rate": 100}}')
        assert receive_all(ws) == []
        assert ws.close_code == 1008 and ws.close_reason and "sample_rate" in ws.close_reason


# -- REST ------------------------------------------------------------------------------


def test_rest_upload_too_big_is_413(server: Running) -> None:
    error = openai_error(post(server, b"\x00" * 700_000), 413)  # the server allows 0.5 MB
    assert error["code"] == "upload_too_large" and "limit" in error["message"]


def test_rest_audio_too_long_is_413_and_names_the_flag_that_raises_it(server: Running) -> None:
    error = openai_error(post(server, wav_bytes(np.zeros(16000 * 4, np.float32))), 413)
    assert error["code"] == "too_long"
    assert "--max-file-s" in str(error["message"]) and "HARKEN_MAX_FILE_S" in str(error["message"])


def test_rest_non_audio_file_is_415(server: Running) -> None:
    error = openai_error(post(server, b"hello, this is not audio at all" * 10, name="a.mp3"), 415)
    assert error["code"] == "unsupported_format"


@pytest.mark.parametrize("data", [b"", wav_bytes(np.zeros(0, np.float32))])
def test_rest_empty_audio_is_400(server: Running, data: bytes) -> None:
    error = openai_error(post(server, data), 400)
    assert error["code"] == "empty_audio" and error["type"] == "invalid_request_error"


def test_rest_bad_fields_are_400_in_openai_shape(server: Running) -> None:
    wav = wav_bytes(np.zeros(1600, np.float32))
    error = openai_error(post(server, wav, response_format="xml"), 400)
    assert "response_format" in error["message"]
    error = openai_error(post(server, wav, language="fr"), 400)
    assert "English" in error["message"]
    missing = httpx.post(f"{server.url}/v1/audio/transcriptions", data={"model": "x"})
    assert openai_error(missing, 400)["param"] == "file"


def test_openai_client_sees_errors_as_api_errors(server: Running) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="empty"):
        client.audio.transcriptions.create(model="harken", file=("a.wav", b""))


# -- capacity and vanishing clients ----------------------------------------------------------


def test_too_many_streams_get_1013_and_503_then_service_resumes(
    server: Running, expected: str
) -> None:
    slots = server.resources.slots
    with ExitStack() as stack:
        for _ in range(slots.limit):
            stack.enter_context(connect(f"{server.ws}/v1/stream"))
        eventually(lambda: slots.in_use == slots.limit)
        error, code = ws_error(server)
        assert (error["code"], code) == ("overloaded", 1013)
        rest = openai_error(post(server, wav_bytes(np.zeros(1600, np.float32))), 503)
        assert rest["code"] == "overloaded"
    eventually(lambda: slots.in_use == 0)
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(CONFIG)
        ws.send(AUDIO_PCM)
        ws.send(EOS)
        assert receive_all(ws)[-1]["text"] == expected


def test_a_vanishing_client_frees_everything_and_does_not_disturb_another(
    server: Running, expected: str
) -> None:
    res = server.resources
    with (
        connect(f"{server.ws}/v1/stream") as steady,
        connect(f"{server.ws}/v1/stream") as vanishing,
    ):
        steady.send(CONFIG)
        steady.send(AUDIO_PCM[:16000])
        vanishing.send(CONFIG)
        vanishing.send(AUDIO_PCM[:24000])
        eventually(lambda: res.engine.dispatcher.active_streams == 2)
        vanishing.socket.shutdown(socket.SHUT_RDWR)  # no close handshake: the client is gone
        vanishing.socket.close()
        steady.send(AUDIO_PCM[16000:])
        steady.send(EOS)
        assert receive_all(steady)[-1]["text"] == expected
    eventually(lambda: res.slots.in_use == 0 and res.engine.dispatcher.active_streams == 0)
    assert res.engine.dispatcher.runner.streams == 0  # type: ignore[attr-defined]


# -- server configuration, auth and timeouts -----------------------------------------------


def test_bad_server_config_says_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_batch must be >= 1"):
        ServerConfig(max_batch=0)
    with pytest.raises(ValueError, match="chunk_ms must be a positive multiple of the 10 ms hop"):
        ServerConfig(chunk_ms=15)
    with pytest.raises(ValueError, match="load_chunk_ms must be 0 .off. or a multiple of the 10"):
        ServerConfig(load_chunk_ms=325)
    with pytest.raises(ValueError, match="load_wait_ms must be >= 0"):
        ServerConfig(load_wait_ms=-1)
    with pytest.raises(ValueError, match="load_beam_threshold must be a number >= 0"):
        ServerConfig(load_beam_threshold=-1)
    with pytest.raises(ValueError, match="load_beam_threshold must be a number >= 0"):
        ServerConfig(load_beam_threshold=float("nan"))
    with pytest.raises(ValueError, match="beam_threshold must be >= 0, got -2"):
        ServerConfig(beam_threshold=-2)
    with pytest.raises(ValueError, match="blank_penalty must be a number, got nan"):
        ServerConfig(blank_penalty=float("nan"))
    with pytest.raises(ValueError, match="lookahead must be a number at most 1, got 2"):
        ServerConfig(lookahead=2)
    with pytest.raises(ValueError, match="dtype int8 runs on the CPU only"):
        ServerConfig(device="cuda", dtype="int8")
    with pytest.raises(ValueError, match="warmup must be one of .*background.*, got 'some'"):
        ServerConfig(warmup="some")
    ServerConfig(chunk_ms=400)  # a load chunk below the live chunk just never applies
    parser = argparse.ArgumentParser()
    cli_serve.add_arguments(parser)
    with pytest.raises(ValueError, match="port must be a int, got 'eighty'"):
        from_args(parser.parse_args([]), {"HARKEN_PORT": "eighty"})
    assert from_args(parser.parse_args(["--port", "9000"]), {"HARKEN_PORT": "1"}).port == 9000
    assert from_args(parser.parse_args([]), {}).search == {}  # the bundle's own search
    penalty = from_args(parser.parse_args([]), {"HARKEN_BLANK_PENALTY": "0"})
    assert penalty.search == {"blank_penalty": 0.0}  # 0 turns the bundle's penalty off
    look = from_args(parser.parse_args(["--lookahead", "0.5"]), {})
    assert look.search == {"lookahead": 0.5}
    off = from_args(parser.parse_args([]), {"HARKEN_SPEAKER_ADAPTATION": "False"})
    assert off.speaker_adaptation is False  # bool("False") would have been True
    with pytest.raises(ValueError, match="speaker_adaptation must be a bool, got 'maybe'"):
        from_args(parser.parse_args([]), {"HARKEN_SPEAKER_ADAPTATION": "maybe"})
    assert cli_serve.main(parser.parse_args(["--bundle", str(tmp_path / "none")])) == 2


@pytest.fixture(scope="module")
def guarded(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tokens = tmp_path_factory.mktemp("auth") / "tokens"
    tokens.write_text("s3cret\n")
    parser = argparse.ArgumentParser()
    cli_serve.add_arguments(parser)
    args = parser.parse_args(["--bundle", str(tiny_bundle), "--auth-tokens-file", str(tokens)])
    config = from_args(args, {"HARKEN_IDLE_TIMEOUT_S": "0.3"})
    with running(config) as r:
        yield r


def test_bearer_tokens_guard_rest_and_websockets(guarded: Running) -> None:
    wav = wav_bytes(np.zeros(1600, np.float32) + 0.01)
    assert openai_error(post(guarded, wav), 401)["code"] == "unauthorized"
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="s3cret", max_retries=0)
    assert isinstance(
        client.audio.transcriptions.create(model="harken", file=("a.wav", wav)).text, str
    )
    error, code = ws_error(guarded, CONFIG)
    assert (error["code"], code) == ("unauthorized", 1008)
    with connect(f"{guarded.ws}/v1/stream?token=s3cret") as ws:
        ws.send(CONFIG)
        ws.send(pcm16(np.zeros(1600, np.float32)))
        ws.send(EOS)
        assert receive_all(ws)[-1]["type"] == "final"


def test_an_idle_stream_is_closed(guarded: Running) -> None:
    with connect(
        f"{guarded.ws}/v1/stream", additional_headers={"Authorization": "Bearer s3cret"}
    ) as ws:
        ws.send(CONFIG)
        error, code = error_of(ws)  # nothing more is sent; the server gives up after 0.3 s
    assert (error["code"], code) == ("idle_timeout", 1001)
