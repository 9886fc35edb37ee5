"""The server end to end: a real uvicorn, real WebSocket, OpenAI and Vosk clients."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
import torch
from websockets.sync.client import ClientConnection, connect

import harken_cli
from decoder.lm import InterpolatedLM, KenLM
from models.bundle import decoder_files, load_bundle, save_bundle
from models.config import FeatureConfig, WarpMerge
from models.ds2 import DS2
from server.config import ServerConfig
from server.decoding import build_decoder
from server.engine import running_engine
from tests.models.conftest import TINY_CONFIGS
from tests.server.serving import (
    AUDIO_PCM,
    Running,
    make_audio,
    pcm16,
    reference_text,
    running,
    vosk_session,
)

FRAME = 3200  # bytes: 100 ms of 16 kHz PCM16


def stream(ws: ClientConnection, audio: bytes, frame: int = FRAME, **config: object) -> list[Any]:
    """Send a config, the audio in frames and eos; every message received until close."""
    ws.send(json.dumps({"type": "config", "sample_rate": 16000, **config}))
    for i in range(0, len(audio), frame):
        ws.send(audio[i : i + frame])
    ws.send(json.dumps({"type": "eos"}))
    return [json.loads(m) for m in ws]


def test_probes_and_metrics(server: Running) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").json() == {"ready": True}
    body = httpx.get(f"{server.url}/metrics").text
    for name in (
        "harken_batch_size",
        "harken_step_seconds",
        "harken_queue_wait_seconds",
        "harken_active_streams",
        "harken_model_states",
        "harken_step_shapes",
    ):
        assert name in body


def test_websocket_stream_gives_partials_then_the_offline_transcript(
    server: Running, expected: str
) -> None:
    with connect(f"{server.ws}/v1/stream") as ws:
        messages = stream(ws, AUDIO_PCM, n_best=3)
        assert ws.close_code == 1000
    *partials, final = messages
    assert partials and all(m["type"] == "partial" for m in partials)
    assert all(expected.startswith(m["stable"]) for m in partials)
    assert final["type"] == "final" and final["text"] == expected
    assert final["duration"] == pytest.approx(1.5, abs=1e-3)
    words = final["words"]
    assert [w["word"] for w in words] == expected.split()
    assert all(0 <= w["start"] < w["end"] <= 1.5 + 0.05 and 0 < w["conf"] <= 1 for w in words)
    assert all(a["end"] <= b["start"] for a, b in zip(words, words[1:], strict=False))


def test_any_frame_size_and_partials_off_give_the_same_final(
    server: Running, expected: str
) -> None:
    with connect(f"{server.ws}/v1/stream") as ws:
        messages = stream(ws, AUDIO_PCM, frame=1234, partials=False, word_timestamps=False)
    assert [m["type"] for m in messages] == ["final"]
    assert messages[0]["text"] == expected and messages[0]["words"] == []


def test_other_sample_rates_and_float_samples_are_resampled(server: Running) -> None:
    audio8k = make_audio(1.0, rate=8000)
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 8000, "encoding": "f32le"}))
        ws.send(audio8k.astype("<f4").tobytes())
        ws.send(json.dumps({"type": "eos"}))
        final = [json.loads(m) for m in ws][-1]
    assert final["type"] == "final" and final["duration"] == pytest.approx(1.0)


def test_openai_client_against_the_rest_endpoint(
    server: Running, expected: str, tmp_path: Path
) -> None:
    import soundfile

    wav = tmp_path / "a.wav"
    soundfile.write(wav, np.frombuffer(AUDIO_PCM, "<i2"), 16000, subtype="PCM_16")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    with wav.open("rb") as f:
        result = client.audio.transcriptions.create(model="harken", file=f)
    assert result.text == expected
    with wav.open("rb") as f:
        verbose = client.audio.transcriptions.create(
            model="harken",
            file=f,
            response_format="verbose_json",
            timestamp_granularities=["word", "segment"],
        )
    assert verbose.text == expected and verbose.duration == pytest.approx(1.5)
    assert [w.word for w in verbose.words or []] == expected.split()
    assert " ".join(s.text for s in verbose.segments or []) == expected
    with wav.open("rb") as f:
        srt = client.audio.transcriptions.create(model="harken", file=f, response_format="srt")
    assert str(srt).startswith("1\n00:00:0") and " --> " in str(srt)


def test_rest_text_and_vtt_formats(server: Running, expected: str, tmp_path: Path) -> None:
    import soundfile

    wav = tmp_path / "a.flac"
    soundfile.write(wav, np.frombuffer(AUDIO_PCM, "<i2"), 16000, subtype="PCM_16")
    files = {"file": ("a.flac", wav.read_bytes())}
    text = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        files=files,
        data={"model": "x", "response_format": "text"},
    )
    assert text.status_code == 200 and text.text.strip() == expected
    vtt = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        files=files,
        data={"model": "x", "response_format": "vtt"},
    )
    assert vtt.text.startswith("WEBVTT\n\n00:00:")


def test_vosk_client_protocol(server: Running, expected: str) -> None:
    *replies, result = vosk_session(server.ws, AUDIO_PCM)
    assert len(replies) == -(-len(AUDIO_PCM) // 8000) and all("partial" in r for r in replies)
    assert result["text"] == expected
    assert [w["word"] for w in result["result"]] == expected.split()
    assert set(result["result"][0]) == {"conf", "start", "end", "word"}


def test_n_best_alternatives_and_hotwords(server: Running, expected: str) -> None:
    with connect(f"{server.ws}/v1/stream") as ws:
        *_, final = stream(ws, AUDIO_PCM, n_best=3, hotwords=["Hello World"])
    alternatives = final["alternatives"]
    assert len(alternatives) == 2 and all(a["text"] != final["text"] for a in alternatives)
    assert alternatives[0]["score"] >= alternatives[1]["score"]


def test_a_bundle_with_an_lm_is_decoded_with_it(tiny_bundle: Path, tmp_path: Path) -> None:
    default = Path(__file__).resolve().parents[2] / "models" / "default"
    if not (default / "decoder.json").is_file():
        pytest.skip("models/default has no LM yet")
    bundle = tmp_path / "with-lm"
    shutil.copytree(tiny_bundle, bundle)
    search = json.loads((default / "decoder.json").read_text())
    for entry in (search, *search.get("mix", [])):  # the LM, and any general LM mixed in
        for name in (entry["lm"], entry["unigrams"]):
            shutil.copy(default / name, bundle / name)
    shutil.copy(default / "decoder.json", bundle / "decoder.json")
    lm = build_decoder(bundle, load_bundle(bundle).config).lm  # type: ignore[attr-defined]
    assert isinstance(lm, InterpolatedLM if search.get("mix") else KenLM)
    expected = reference_text(bundle, np.frombuffer(AUDIO_PCM, "<i2").astype(np.float32) / 32768)
    with (
        running(ServerConfig(dtype="fp32", bundle=str(bundle))) as server,
        connect(f"{server.ws}/v1/stream") as ws,
    ):
        *_, final = stream(ws, AUDIO_PCM)
    assert final["text"] == expected


def test_the_load_log_names_the_lm_or_says_there_is_none(
    tiny_bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bundle served without an LM reads many more words wrong, and only the log at
    load can tell an operator why."""
    default = Path(__file__).resolve().parents[2] / "models" / "default"
    if not (default / "decoder.json").is_file():
        pytest.skip("models/default has no LM yet")
    with_lm = tmp_path / "with-lm"
    shutil.copytree(tiny_bundle, with_lm)
    for name in decoder_files(default):
        shutil.copy(default / name, with_lm / name)

    async def load(bundle: Path) -> None:
        config = ServerConfig(dtype="fp32", bundle=str(bundle), decoder_processes=False)
        async with running_engine(dataclasses.replace(config, warmup="first")):
            pass

    with caplog.at_level("INFO", logger="harken.server"):
        asyncio.run(load(tiny_bundle))
        assert "language model: none" in caplog.text and "no decoder.json" in caplog.text
        caplog.clear()
        asyncio.run(load(with_lm))
    assert "language model: lm.binary, mixed with general.binary at 0.8" in caplog.text


def test_a_bundle_with_speaker_adaptation_streams_what_it_transcribes_offline(
    warped_bundle: Path,
) -> None:
    expected = reference_text(
        warped_bundle, np.frombuffer(AUDIO_PCM, "<i2").astype(np.float32) / 32768
    )
    with running(ServerConfig(dtype="fp32", bundle=str(warped_bundle))) as server:
        with connect(f"{server.ws}/v1/stream") as ws:
            *_, final = stream(ws, AUDIO_PCM, frame=778)
        with connect(f"{server.ws}/v1/stream") as ws:
            *_, again = stream(ws, AUDIO_PCM, frame=3200)
    assert final["text"] == again["text"] == expected


def test_under_load_streams_step_in_bigger_chunks_and_still_give_the_offline_transcript(
    tiny_bundle: Path, expected: str
) -> None:
    """`load_wait_ms=0` makes the model count as lagging at any queue wait, so every live
    step after the first takes `load_chunk_ms` of audio: a quarter of the steps for the same
    1.5 s, and the same transcript (any chunking equals offline)."""
    steps = {}
    for load_chunk_ms in (0, 320):
        config = ServerConfig(
            dtype="fp32",
            bundle=str(tiny_bundle),
            chunk_ms=80,
            load_chunk_ms=load_chunk_ms,
            load_wait_ms=0.0,
            load_beam_threshold=0.0,  # the search as offline: only the chunking changes
        )
        with running(config) as server:
            with connect(f"{server.ws}/v1/stream") as ws:
                *_, final = stream(ws, AUDIO_PCM)
            assert final["text"] == expected
            metrics = httpx.get(f"{server.url}/metrics").text
            steps[load_chunk_ms] = float(metrics.split("harken_batch_size_count ")[1].split()[0])
            assert _gauge(metrics, "harken_narrowed_searches") == 0
    # 1.5 s in 80 ms steps is ~18 of them; in 320 ms steps ~5 (plus the first and the flush)
    assert steps[320] <= 8 < 15 <= steps[0], steps


def _gauge(metrics: str, name: str) -> float:
    return float(metrics.split(f"\n{name} ")[1].split()[0])


def test_under_load_the_search_narrows_and_says_so_in_metrics(tiny_bundle: Path) -> None:
    """`load_wait_ms=0` makes the model count as lagging after the first step, so the beam
    search decodes with --load-beam-threshold from then on: /metrics counts those calls, and
    the stream still gets its final. An idle server (the default wait) narrows nothing."""
    narrowed = {}
    for wait_ms in (0.0, 5000.0):
        config = ServerConfig(
            dtype="fp32",
            bundle=str(tiny_bundle),
            chunk_ms=80,
            load_chunk_ms=0,
            load_wait_ms=wait_ms,
            load_beam_threshold=0.5,
        )
        with running(config) as server:
            with connect(f"{server.ws}/v1/stream") as ws:
                *_, final = stream(ws, AUDIO_PCM)
            assert final["type"] == "final"
            metrics = httpx.get(f"{server.url}/metrics").text
            narrowed[wait_ms] = _gauge(metrics, "harken_narrowed_searches")
    assert narrowed[5000.0] == 0 < 10 <= narrowed[0.0], narrowed


@pytest.mark.parametrize("merge", ["choose", "mean"])
def test_a_log_mel_stride_3_bundle_streams_what_it_transcribes_offline(
    tmp_path: Path, merge: WarpMerge
) -> None:
    """The default model's shape (80 log-mel bins, stride 3, GRU, speaker adaptation that
    chooses a warp or averages them): live chunks of 15 frames and any framing of the audio
    give the offline transcript."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(
        TINY_CONFIGS["mel-1d-stride3"],
        features=FeatureConfig(n_mels=80, cepstral_lifter=48),
        warp_factors=(0.8, 1.0),
        warp_decide_frames=6,
        warp_merge=merge,
    )
    model = DS2(cfg).eval()
    with torch.no_grad():
        model.feat_mean.fill_(-8.0)
        model.feat_std.fill_(3.0)
        model.output.bias[1] += 0.5
    bundle = save_bundle(model, tmp_path / "mel")
    expected = reference_text(bundle, np.frombuffer(AUDIO_PCM, "<i2").astype(np.float32) / 32768)
    assert expected.strip()
    with running(ServerConfig(dtype="fp32", bundle=str(bundle))) as server:
        with connect(f"{server.ws}/v1/stream") as ws:
            *_, final = stream(ws, AUDIO_PCM, frame=778)
        with connect(f"{server.ws}/v1/stream") as ws:
            *_, again = stream(ws, AUDIO_PCM, frame=3200)
    assert final["text"] == again["text"] == expected


def test_harken_transcribe_in_process_and_through_a_server(
    server: Running,
    expected: str,
    tiny_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import soundfile

    wav, junk = tmp_path / "a.wav", tmp_path / "junk.wav"
    soundfile.write(wav, np.frombuffer(AUDIO_PCM, "<i2"), 16000, subtype="PCM_16")
    junk.write_bytes(b"not audio" * 20)
    for where in (["--bundle", str(tiny_bundle)], ["--server", server.url]):
        assert harken_cli.main(["transcribe", str(wav), str(junk), "--words", *where]) == 1
        good, bad = (json.loads(line) for line in capsys.readouterr().out.splitlines())
        assert good["file"] == str(wav) and good["text"] == expected
        assert [w["word"] for w in good["words"]] == expected.split()
        assert bad["file"] == str(junk) and "error" in bad


def test_a_file_longer_than_a_live_stream_is_heard_a_block_at_a_time(
    tiny_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Files have a limit of their own (`--max-file-s`), far above a live stream's, and are
    decoded and heard a block at a time: a file of six blocks reads as it does whole
    offline, through REST and `harken transcribe` alike. Past the limit, the error names
    the flag and the variable that raise it, and the in-process command has both."""
    import soundfile

    from server import audio

    monkeypatch.setattr(audio, "_READ_BLOCK", 16000)  # 1 s blocks, so a 6 s file is six
    pcm = pcm16(make_audio(6.0, seed=5))
    wav = tmp_path / "long.wav"
    soundfile.write(wav, np.frombuffer(pcm, "<i2"), 16000, subtype="PCM_16")
    expected = reference_text(tiny_bundle, np.frombuffer(pcm, "<i2").astype(np.float32) / 32768)
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), max_stream_s=2, max_file_s=8)
    with running(config) as server:
        api = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        heard = api.audio.transcriptions.create(model="whisper-1", file=("a.wav", wav.read_bytes()))
    assert heard.text == expected
    where = [str(wav), "--bundle", str(tiny_bundle), "--dtype", "fp32"]
    assert harken_cli.main(["transcribe", *where]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == expected
    assert harken_cli.main(["transcribe", *where, "--max-file-s", "5"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert "5 s allowed" in error and "--max-file-s" in error and "HARKEN_MAX_FILE_S" in error
    monkeypatch.setenv("HARKEN_MAX_FILE_S", "5")
    assert harken_cli.main(["transcribe", *where]) == 1
    assert "5 s allowed" in json.loads(capsys.readouterr().out)["error"]


def test_harken_transcribe_adapts_to_files_in_process_only(
    server: Running, tiny_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import soundfile

    pcm = pcm16(make_audio(1.5, seed=4))
    wav = tmp_path / "a.wav"
    soundfile.write(wav, np.frombuffer(pcm, "<i2"), 16000, subtype="PCM_16")
    quantised = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    adapted = reference_text(tiny_bundle, quantised, adapt_input=True)
    assert adapted != reference_text(tiny_bundle, quantised)
    where = ["--bundle", str(tiny_bundle), "--dtype", "fp32"]
    assert harken_cli.main(["transcribe", str(wav), "--adapt-input", "true", *where]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == adapted
    assert (
        harken_cli.main(["transcribe", str(wav), "--adapt-input", "true", "--server", server.url])
        == 2
    )
    assert "POST the file" in capsys.readouterr().err
