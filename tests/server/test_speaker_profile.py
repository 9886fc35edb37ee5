"""A live stream that adapts to its speaker: it fits a profile from its own audio as it goes,
hears the rest through it, fits again as its audio doubles, and leaves other streams as they
were, also when it goes away in the middle of a fit."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import torch
from websockets.sync.client import ClientConnection, connect

from models.ensemble import load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputTransforms
from models.metrics import greedy_decode
from server.config import ServerConfig
from server.engine import running_engine
from server.profiles import decode_profile, encode_profile, network_digest
from server.recording import transcribe
from server.runner import Chunk
from server.session import Engine, Options, Session
from tests.server.serving import Running, pcm16, receive_all, running

F32 = npt.NDArray[np.float32]
RATE = 16000


def _voice(seconds: float, seed: int = 4) -> F32:
    """A buzzy tone that glides, with noise: something the tiny model's fit can move."""
    t = np.arange(int(RATE * seconds)) / RATE
    f0 = 140 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    buzz = sum(np.sin(k * phase) / k for k in range(1, 8))
    noise = 0.02 * np.random.default_rng(seed).standard_normal(len(t))
    return np.asarray(0.2 * buzz + noise, np.float32)


def _config(bundle: Path) -> ServerConfig:
    return ServerConfig(
        dtype="fp32",
        bundle=str(bundle),
        decoder="greedy",
        decoder_processes=False,
        profile_first_s=0.4,
        profile_max_s=0.8,
    )


def _spy(engine: Engine) -> dict[int, list[Chunk]]:
    """Record every chunk the sessions submit, by stream (the real dispatcher runs them)."""
    sent: dict[int, list[Chunk]] = {}
    submit = engine.dispatcher.submit

    async def recording(stream: int, chunk: Chunk, last: bool) -> Any:
        sent.setdefault(stream, []).append(chunk)
        return await submit(stream, chunk, last)

    engine.dispatcher.submit = recording  # type: ignore[method-assign,assignment]
    return sent


def _fits_waited(metrics: str) -> dict[str, float]:
    """/metrics' count of profile fits heard, by kind ("first" or "refit")."""
    pattern = r'^harken_speaker_profile_wait_seconds_count\{fit="(\w+)"\} (\S+)$'
    return {kind: float(n) for kind, n in re.findall(pattern, metrics, re.M)}


def _send_live(ws: ClientConnection, audio: bytes, answered: bool = False) -> None:
    """Audio in 100 ms frames, a little faster than real time, so fits finish between them
    (`answered`: read the reply each frame gets, as a Vosk client does)."""
    for i in range(0, len(audio), 3200):
        ws.send(audio[i : i + 3200])
        if answered:
            ws.recv()
        time.sleep(0.03)


async def _stream(engine: Engine, audio: F32, adapt: bool) -> tuple[int, str]:
    """Feed `audio` as a live client would, 100 ms at a time; (stream id, final text)."""
    session = Session(engine, Options(sample_rate=RATE, partials=False, adapt_speaker=adapt))
    try:
        await session.start()
        for i in range(0, len(audio), RATE // 10):
            await session.feed(audio[i : i + RATE // 10])
            await asyncio.sleep(0.03)  # real time, compressed: fits finish between chunks
        return session.stream, (await session.finish()).text
    finally:
        session.close()


def test_a_stream_fits_its_speaker_profile_as_it_goes_and_hears_the_rest_through_it(
    warped_bundle: Path,
) -> None:
    async def run() -> tuple[list[Chunk], list[Chunk], Any, Any, str, str]:
        async with running_engine(_config(warped_bundle)) as engine:
            alone = (await transcribe(engine, _voice(3.0, seed=9)))[1].text
            sent = _spy(engine)
            (adapted, _), (plain, text) = await asyncio.gather(
                _stream(engine, _voice(3.0), adapt=True),
                _stream(engine, _voice(3.0, seed=9), adapt=False),
            )
            frames = np.concatenate([c.feats for c in sent[adapted]])
            steps = np.cumsum([len(c.feats) for c in sent[adapted]])
            first = int(steps[np.argmax(steps >= 40)])  # 0.4 s of 10 ms frames, in whole steps
            assert engine.fit_profile is not None
            fit = engine.fit_profile
            want = [
                await fit(frames[:n], engine.profiles.config(first=n == first)) for n in (first, 80)
            ]
            return sent[adapted], sent[plain], want, first, text, alone

    adapted, plain, want, first, text, alone = asyncio.run(run())
    carried = [(i, c.profile) for i, c in enumerate(adapted) if c.profile is not None]
    assert len(carried) == 2, "one profile at 0.4 s of audio, one more at 0.8 s, then no more"
    for (_, got), fitted in zip(carried, want, strict=True):
        np.testing.assert_allclose(got.gain, fitted.gain, atol=1e-6)
        np.testing.assert_allclose(got.offset, fitted.offset, atol=1e-6)
    stepped_before = sum(len(c.feats) for c in adapted[: carried[0][0]])
    assert stepped_before >= first  # heard through the profile only once it was fitted
    assert not np.allclose(want[0].gain, want[1].gain)  # the second read more of the voice
    assert all(c.profile is None and c.transforms is None for c in plain)
    assert text == alone  # the stream beside it heard as if alone


def test_new_speakers_fit_first_and_refits_wait_until_no_fit_is_under_way(
    warped_bundle: Path,
) -> None:
    """On a busy fit thread a stream's first profile does not queue behind others' refits."""

    async def run() -> tuple[list[tuple[int, float, float]], dict[int, list[Chunk]]]:
        async with running_engine(_config(warped_bundle)) as engine:
            fit, calls = engine.fit_profile, []
            assert fit is not None

            async def slow(frames: F32, config: AdaptConfig) -> InputTransforms:
                began = time.perf_counter()
                await asyncio.sleep(0.3)  # a fit thread with more to do than this fit
                fitted = await fit(frames, config)
                calls.append((len(frames), began, time.perf_counter()))
                return fitted

            engine.fit_profile = slow
            sent = _spy(engine)
            await asyncio.gather(*(_stream(engine, _voice(6.0, seed=s), True) for s in (1, 2)))
            return calls, sent

    calls, sent = asyncio.run(run())
    firsts = sorted((b, e) for n, b, e in calls if n < 80)
    refits = [(b, e) for n, b, e in calls if n >= 80]
    assert len(firsts) == 2 and firsts[1][0] < firsts[0][1]  # the second did not wait
    assert len(refits) == 2
    for began, ended in refits:  # each waited until it was the only fit under way
        others = [(b, e) for _, b, e in calls if (b, e) != (began, ended)]
        assert all(e <= began or b >= ended for b, e in others)
    for chunks in sent.values():  # and each stream was still heard through both
        assert sum(c.profile is not None for c in chunks) == 2


def test_a_stream_that_goes_away_mid_fit_loses_nothing_else(warped_bundle: Path) -> None:
    async def run() -> tuple[str, str, int]:
        async with running_engine(_config(warped_bundle)) as engine:
            alone = (await transcribe(engine, _voice(2.0, seed=9)))[1].text
            leaving = Session(engine, Options(sample_rate=RATE, adapt_speaker=True))
            await leaving.start()
            audio = _voice(2.0)
            staying = asyncio.ensure_future(_stream(engine, _voice(2.0, seed=9), adapt=False))
            await leaving.feed(audio[: int(0.5 * RATE)])  # past 0.4 s: its fit starts
            leaving.close()  # the client is gone while the fit runs
            _, text = await staying
            await asyncio.sleep(0.2)  # the abandoned fit finishes or is dropped quietly
            return text, alone, engine.model_states()

    text, alone, states = asyncio.run(run())
    assert text == alone  # the other stream heard as if alone
    assert states == 0  # and the model holds the state of neither


def test_a_client_keeps_its_profile_and_a_later_stream_is_heard_through_it_from_the_start(
    warped_bundle: Path,
) -> None:
    config = dataclasses.replace(_config(warped_bundle), max_streams=2)
    audio = pcm16(_voice(3.0))
    with running(config) as server:
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(json.dumps({"type": "config", "sample_rate": RATE, "adapt_speaker": True}))
            _send_live(ws, audio)
            ws.send(json.dumps({"type": "eos"}))
            messages = receive_all(ws)
        profiles = [m for m in messages if m["type"] == "speaker_profile"]
        assert profiles and messages[-1]["type"] == "final"
        metrics = httpx.get(f"{server.url}/metrics").text
        waited = _fits_waited(metrics)  # operators see fits lag, new speakers' on their own
        assert waited["first"] == 1 and sum(waited.values()) >= len(profiles)
        assert profiles[0]["seconds"] >= 0.4 and profiles[-1]["seconds"] <= 0.8
        token = profiles[-1]["profile"]
        later = _voice(1.5, seed=5)
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(json.dumps({"type": "config", "sample_rate": RATE, "speaker_profile": token}))
            ws.send(pcm16(later))
            ws.send(json.dumps({"type": "eos"}))
            final = receive_all(ws)[-1]
        # a stream that did not ask for profiles gets none, whatever the server adapts
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(json.dumps({"type": "config", "sample_rate": RATE}))
            ws.send(audio)
            ws.send(json.dumps({"type": "eos"}))
            assert all(m["type"] != "speaker_profile" for m in receive_all(ws))
    networks = load_networks(warped_bundle)
    digest = network_digest(warped_bundle / "model.safetensors")
    profile = decode_profile(token, digest, 3, networks.config.features.n_bins)
    feats = torch.from_numpy(
        featurize(np.frombuffer(pcm16(later), "<i2") / 32768.0, networks.config.features)
    )
    with torch.inference_mode():
        lp, n = networks.forward(feats[None], torch.tensor([len(feats)]), profiles=[profile])
    heard = greedy_decode(lp[0, : int(n[0])].numpy(), networks.config.alphabet)
    assert final["type"] == "final" and final["text"] == heard


def test_a_profile_token_that_cannot_apply_is_refused_with_the_reason(
    server: Running, warped_bundle: Path
) -> None:
    n_bins = load_networks(warped_bundle).config.features.n_bins
    ones = InputTransforms(np.ones((1, n_bins), np.float32), np.zeros((1, n_bins), np.float32))
    other = encode_profile(ones, b"\0" * 8)  # a network that is not this server's
    own = encode_profile(
        ones, network_digest(Path(server.resources.config.bundle) / "model.safetensors")
    )
    nan = InputTransforms(np.full((1, n_bins), np.nan, np.float32), ones.offset)
    digest = network_digest(Path(server.resources.config.bundle) / "model.safetensors")
    back = decode_profile(encode_profile(ones, digest), digest, 1, n_bins)
    np.testing.assert_array_equal(back.gain, ones.gain)  # what a client keeps comes back
    for token, words in [
        (encode_profile(nan, digest), "not finite"),
        ("not a token!", "base64url"),
        (base64.urlsafe_b64encode(b"RIFF" + bytes(40)).decode(), "not a profile token"),
        (other, "another model"),
        (own[:40], "cut short"),
    ]:
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(json.dumps({"type": "config", "sample_rate": RATE, "speaker_profile": token}))
            error = receive_all(ws)[-1]
            assert (error["type"], error["code"]) == ("error", "bad_config"), error
            assert "speaker_profile" in error["message"] and words in error["message"], error


def test_a_server_that_adapts_every_stream_adapts_vosk_and_silent_clients_too(
    warped_bundle: Path,
) -> None:
    """`--adapt-speakers true`: streams whose clients say nothing of it adapt (their fits show
    in /metrics), and a client that did not ask is sent no profile message it may not know."""
    config = dataclasses.replace(_config(warped_bundle), adapt_speakers=True)
    audio = pcm16(_voice(3.0))
    with running(config) as server:
        with connect(f"{server.ws}/vosk") as ws:
            ws.send('{ "config" : { "sample_rate" : 16000 } }')
            _send_live(ws, audio, answered=True)
            ws.send('{"eof" : 1}')
            assert "text" in json.loads(ws.recv())
        with connect(f"{server.ws}/v1/stream") as ws:
            ws.send(json.dumps({"type": "config", "sample_rate": RATE}))
            _send_live(ws, audio)
            ws.send(json.dumps({"type": "eos"}))
            messages = receive_all(ws)
        metrics = httpx.get(f"{server.url}/metrics").text
    assert messages[-1]["type"] == "final"
    assert all(m["type"] in ("partial", "final") for m in messages)
    assert _fits_waited(metrics)["first"] == 2  # each stream fitted at least once


def test_after_a_reset_the_next_utterance_is_heard_through_the_profile_from_its_start(
    warped_bundle: Path,
) -> None:
    """Vosk's reset ends the utterance and starts a new model stream: the speaker is the
    same, so the new stream's first chunk carries the profile the session has."""

    async def run() -> tuple[list[Chunk], list[Chunk]]:
        async with running_engine(_config(warped_bundle)) as engine:
            sent = _spy(engine)
            session = Session(engine, Options(sample_rate=RATE, adapt_speaker=True))
            await session.start()
            try:
                audio = _voice(1.5)
                for i in range(0, len(audio), RATE // 10):
                    await session.feed(audio[i : i + RATE // 10])
                    await asyncio.sleep(0.03)
                before = session.stream
                await session.reset()
                await session.feed(_voice(0.5, seed=5))
                await session.finish()
                return sent[before], sent[session.stream]
            finally:
                session.close()

    first, second = asyncio.run(run())
    assert any(c.profile is not None for c in first)  # fitted during the first utterance
    assert second[0].profile is not None  # and sent again with the next stream's first chunk
