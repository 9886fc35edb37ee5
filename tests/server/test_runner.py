"""ModelRunner: batched, interleaved streams give what the model gives each stream alone."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

from evaluation.cli_eval import decode_all
from models.bundle import load_bundle
from models.ds2 import DS2
from models.ensemble import Networks, load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, fit_transforms
from models.metrics import greedy_decode
from models.warp import adapted_forward
from server.config import ServerConfig
from server.decoding import build_decoder
from server.dispatch import BatchDispatcher, Work
from server.engine import running_engine
from server.recording import transcribe
from server.runner import (
    LONG_STEP_FRAMES,
    LONG_STEP_STREAMS,
    Chunk,
    ModelRunner,
    WarmShapes,
    padded_rows,
    runner_for_bundle,
)

F32 = npt.NDArray[np.float32]


@pytest.fixture(params=["plain", "speaker-warp", "ensemble", "ensemble-lookahead"])
def kind_bundle(
    request: pytest.FixtureRequest,
    tiny_bundle: Path,
    warped_bundle: Path,
    ensemble_bundle: Path,
    lookahead_ensemble_bundle: Path,
) -> tuple[str, Path]:
    """One network, one with speaker warps, an ensemble of two, and one whose second network
    looks further ahead: (kind, bundle)."""
    bundles = {
        "plain": tiny_bundle,
        "speaker-warp": warped_bundle,
        "ensemble": ensemble_bundle,
        "ensemble-lookahead": lookahead_ensemble_bundle,
    }
    return request.param, bundles[request.param]


def _utterance(seed: int, seconds: float) -> F32:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    tone = 0.3 * np.sin(2 * np.pi * (200 + 100 * seed) * t)
    return np.asarray(tone + 0.05 * rng.standard_normal(len(t)), np.float32)


def _whole(model: DS2 | Networks, feats: F32) -> F32:
    x, n = torch.from_numpy(feats)[None], torch.tensor([len(feats)])
    log_probs, n = (
        model.forward(x, n) if isinstance(model, Networks) else adapted_forward(model, x, n)
    )
    return np.asarray(log_probs[0, : int(n[0])].numpy(), np.float32)


def _chunks(feats: F32, size: int, stride: int) -> list[tuple[F32, bool]]:
    """Steps of `size` frames (a multiple of the stride), then the tail as the last chunk."""
    body = len(feats) - len(feats) % stride
    steps = [(feats[i : min(i + size, body)], False) for i in range(0, body, size)]
    return [*steps, (feats[body:], True)]


def test_interleaved_streams_through_the_dispatcher_equal_whole_utterances(
    kind_bundle: tuple[str, Path], tiny_bundle: Path, warped_bundle: Path
) -> None:
    kind, bundle = kind_bundle
    runner = runner_for_bundle(str(bundle))
    model = load_networks(bundle)
    stride = model.config.time_stride
    # six streams (rows are padded past four) that end at different times
    feats = [
        featurize(_utterance(s, secs), model.config.features)
        for s, secs in [(0, 1.3), (1, 0.71), (2, 2.0), (3, 1.1), (4, 0.5), (5, 1.7)]
    ]
    sizes = [8, 4, 16, 8, 8, 8]  # different chunkings: steps are grouped by length in a batch

    async def stream(d: BatchDispatcher[Chunk, F32], f: F32, size: int) -> F32:
        sid = d.open_stream()
        outs = [await d.submit(sid, Chunk(c), last) for c, last in _chunks(f, size, stride)]
        return np.concatenate(outs)

    async def main() -> list[F32]:
        d: BatchDispatcher[Chunk, F32] = BatchDispatcher(runner)
        d.start()
        try:
            return await asyncio.gather(
                *(stream(d, f, n) for f, n in zip(feats, sizes, strict=True))
            )
        finally:
            await d.stop()

    outputs = asyncio.run(main())
    for f, out in zip(feats, outputs, strict=True):
        np.testing.assert_allclose(out, _whole(model, f), atol=1e-4)
    if kind != "plain":  # the warps chose (and a member mixed): not the plain network's
        plain = load_networks(tiny_bundle)
        assert any(
            not np.allclose(out, _whole(plain, f), atol=1e-4)
            for f, out in zip(feats, outputs, strict=True)
        )
    if kind.startswith("ensemble"):  # the member really counted: not the warped network alone
        alone = load_networks(warped_bundle)
        for f, out in zip(feats, outputs, strict=True):
            assert not np.allclose(out, _whole(alone, f), atol=1e-3)
    assert runner.streams == 0  # every finished stream's state is gone
    runner.close()


def test_bad_chunks_are_refused_with_what_to_change(tiny_bundle: Path) -> None:
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    n_bins = runner.model.config.features.n_bins
    with pytest.raises(ValueError, match="multiple of 2 frames, got 3"):
        runner.run_sync([Work(1, Chunk(np.zeros((3, n_bins), np.float32)))])
    with pytest.raises(ValueError, match=f"feats must be \\[T, {n_bins}\\]"):
        runner.run_sync([Work(1, Chunk(np.zeros((4, 7), np.float32)))])
    with pytest.raises(ValueError, match="dtype must be one of"):
        ModelRunner.from_bundle(str(tiny_bundle), dtype="fp8")
    runner.release(1)
    assert runner.streams == 0
    runner.close()


def test_release_drops_a_stream_state(tiny_bundle: Path) -> None:
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    n_bins = runner.model.config.features.n_bins
    runner.run_sync([Work(7, Chunk(np.zeros((4, n_bins), np.float32)))])
    assert runner.streams == 1
    runner.release(7)
    assert runner.streams == 0
    runner.warmup()
    assert runner.streams == 0
    runner.close()


def test_speaker_adaptation_can_be_switched_off(tiny_bundle: Path, warped_bundle: Path) -> None:
    model = load_bundle(tiny_bundle)
    feats = featurize(_utterance(0, 1.3), model.config.features)
    body = len(feats) - len(feats) % model.config.time_stride
    outs = {}
    for name, runner in {
        "off": ModelRunner.from_bundle(str(warped_bundle), speaker_adaptation=False),
        "on": ModelRunner.from_bundle(str(warped_bundle)),
    }.items():
        first = runner.run_sync([Work(1, Chunk(feats[:body]))])[0]
        outs[name] = np.concatenate(
            [first, runner.run_sync([Work(1, Chunk(feats[body:]), last=True)])[0]]
        )
        runner.close()
    np.testing.assert_allclose(outs["off"], _whole(model, feats), atol=1e-4)
    assert not np.allclose(outs["on"], outs["off"], atol=1e-4)


def test_batches_run_at_few_sizes_and_warm_up_compiles_them_all(tiny_bundle: Path) -> None:
    # each size is a kernel shape the CPU libraries compile and cache with a copy of the
    # weights, so the sizes a server can make must be few
    sizes = {padded_rows(n) for n in range(1, 65)}
    assert all(padded_rows(n) >= n for n in range(1, 65)) and len(sizes) <= 20
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    runner.warmup(WarmShapes(lengths=(8, 16), max_streams=6, max_tail=15))
    assert runner.streams == 0  # warm-up leaves no state behind
    warmed = runner.shapes
    assert warmed >= 2 * len({padded_rows(n) for n in range(1, 7)})
    n_bins = runner.model.config.features.n_bins
    out = asyncio.run(runner.run([Work(1, Chunk(np.zeros((8, n_bins), np.float32)))]))
    assert out[0].shape[1] == runner.model.config.vocab_size
    # live steps and streams ending together with tails of any length up to a chunk:
    # all at warmed shapes, so nothing new is compiled
    rng = np.random.default_rng(0)

    def feats(frames: int) -> np.ndarray:
        return rng.standard_normal((frames, n_bins)).astype(np.float32)

    for round_ in range(6):
        streams = range(10 * round_, 10 * round_ + int(rng.integers(1, 7)))
        asyncio.run(runner.run([Work(s, Chunk(feats(8))) for s in streams]))
        ends = [Work(s, Chunk(feats(int(rng.integers(0, 16)))), last=True) for s in streams]
        asyncio.run(runner.run(ends))
    assert runner.streams == 0
    assert runner.shapes == warmed
    runner.close()


def test_a_server_adapting_every_file_warms_the_sizes_adapted_files_step_at(
    tiny_bundle: Path,
) -> None:
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    runner.warmup(WarmShapes(lengths=(8,), max_streams=3, max_tail=7, adapted=True))
    warmed = runner.shapes
    n_bins = runner.model.config.features.n_bins
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((20, n_bins)).astype(np.float32) - 8 for _ in range(3)]
    fitted = [asyncio.run(runner.fit_input(f)) for f in feats]
    pairs = list(zip(feats, fitted, strict=True))
    for live in range(4):  # adapted files beside 0-3 live streams, three streams a batch
        files = [Work(s, Chunk(f[:8], t)) for s, (f, t) in enumerate(pairs[: 3 - live])]
        others = [Work(10 + s, Chunk(feats[0][:8])) for s in range(live)]
        asyncio.run(runner.run(files + others))
        for work in files + others:
            runner.release(work.stream)
    ends = [Work(s, Chunk(f[:5], t), last=True) for s, (f, t) in enumerate(pairs)]
    asyncio.run(runner.run(ends))
    assert runner.shapes == warmed
    plain = ModelRunner.from_bundle(str(tiny_bundle))
    plain.warmup(WarmShapes(lengths=(8,), max_streams=3, max_tail=7))
    assert plain.shapes < warmed  # the doubled rows are sizes a plain server never warms
    runner.close()
    plain.close()


@pytest.mark.parametrize("kind", ["plain", "ensemble"])
def test_a_server_warming_in_the_background_serves_at_once_and_ends_fully_warmed(
    tiny_bundle: Path, ensemble_bundle: Path, kind: str
) -> None:
    """Ready after a stream's own shapes: nothing more warms while a stream is open, a stream
    heard meanwhile gets the transcript a fully warmed server gives, and once none is open
    the rest are warmed, every one that `all` warms."""
    bundle = str(tiny_bundle if kind == "plain" else ensemble_bundle)
    audio = _utterance(3, 2.3)

    async def serve(warmup: str) -> tuple[int, str, int]:
        config = ServerConfig(
            dtype="fp32", bundle=bundle, decoder="greedy", decoder_processes=False, warmup=warmup
        )
        async with running_engine(config) as engine:
            at_ready = engine.step_shapes()
            stream = engine.dispatcher.open_stream()
            await asyncio.sleep(0.5)
            assert engine.step_shapes() <= at_ready + 1  # the one under way, at most
            engine.dispatcher.close_stream(stream)
            text = (await transcribe(engine, audio))[1].text
            for _ in range(600):
                if warmup != "background" or engine.step_shapes() >= full:
                    break
                await asyncio.sleep(0.05)
            return at_ready, text, engine.step_shapes()

    full = 0
    full, expected, _ = asyncio.run(serve("all"))
    at_ready, text, warmed = asyncio.run(serve("background"))
    assert at_ready < full // 2 and text == expected and warmed == full
    at_ready, text, used = asyncio.run(serve("first"))
    assert at_ready < full // 2 and text == expected and used < full  # nothing more warms


def test_a_server_stopped_while_it_warms_stops_cleanly(
    ensemble_bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def serve() -> int:
        config = ServerConfig(
            dtype="fp32", bundle=str(ensemble_bundle), decoder_processes=False, max_batch=64
        )
        async with running_engine(config) as engine:
            return engine.step_shapes()

    with caplog.at_level("INFO", logger="harken.server"):
        asyncio.run(serve())
    assert "warm-up in the background stopped" not in caplog.text
    assert "more in the background" in caplog.text


def test_a_batch_of_many_long_steps_runs_in_parts_and_equals_whole_utterances(
    tiny_bundle: Path,
) -> None:
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    model = load_bundle(tiny_bundle)
    n = LONG_STEP_STREAMS + 3  # one batch, more backlogs than a long step takes
    feats = [featurize(_utterance(s, 1.0), model.config.features) for s in range(n)]
    long = [Work(s, Chunk(f[:LONG_STEP_FRAMES])) for s, f in enumerate(feats)]
    tails = [Work(s, Chunk(f[LONG_STEP_FRAMES:]), last=True) for s, f in enumerate(feats)]
    heads, ends = asyncio.run(runner.run(long)), asyncio.run(runner.run(tails))
    for f, head, end in zip(feats, heads, ends, strict=True):
        np.testing.assert_allclose(np.concatenate([head, end]), _whole(model, f), atol=1e-4)
    assert runner.streams == 0
    runner.close()


def test_the_server_hears_an_ensemble_bundle_as_eval_does(
    ensemble_bundle: Path, warped_bundle: Path
) -> None:
    """Loaded by the engine, both networks run per stream: the transcript is the greedy
    reading of the mixed offline output, which neither network alone gives."""
    audio = _utterance(6, 1.9)

    async def run() -> str:
        config = ServerConfig(
            dtype="fp32", bundle=str(ensemble_bundle), decoder="greedy", decoder_processes=False
        )
        async with running_engine(config) as engine:
            return (await transcribe(engine, audio))[1].text

    networks = load_networks(ensemble_bundle)
    feats = featurize(audio, networks.config.features)
    expected = greedy_decode(_whole(networks, feats), networks.config.alphabet)
    alone = load_networks(warped_bundle)
    assert asyncio.run(run()) == expected
    assert expected != greedy_decode(_whole(alone, feats), alone.config.alphabet)


def test_ensemble_false_serves_the_own_network_with_the_settings_kept_for_it(
    ensemble_bundle: Path, warped_bundle: Path, tmp_path: Path
) -> None:
    """`--ensemble false` on a pair: the transcript is the own network's alone, searched with
    the settings the bundle keeps for it (`ensemble.alone`); a flag still overrides them."""
    bundle = tmp_path / "pair"
    shutil.copytree(ensemble_bundle, bundle)
    meta = json.loads((bundle / "config.json").read_text())
    meta["ensemble"]["alone"] = {"blank_penalty": 6.0}
    (bundle / "config.json").write_text(json.dumps(meta))
    audio = _utterance(6, 1.9)

    async def run(**changes: Any) -> str:
        config = ServerConfig(dtype="fp32", bundle=str(bundle), decoder_processes=False, **changes)
        async with running_engine(config) as engine:
            return (await transcribe(engine, audio))[1].text

    alone = load_networks(warped_bundle)
    out = _whole(alone, featurize(audio, alone.config.features))

    def beam(penalty: float) -> str:
        decoder = build_decoder(warped_bundle, alone.config, "beam", {"blank_penalty": penalty})
        return decode_all(decoder, [out])[0][0]

    assert asyncio.run(run(ensemble=False)) == beam(6.0) != beam(0.0)
    assert asyncio.run(run(ensemble=False, blank_penalty=0.0)) == beam(0.0)
    assert asyncio.run(run()) != beam(6.0)  # by default both networks hear it


@pytest.mark.parametrize("how", ["file", "profile"])
def test_an_adapted_stream_streams_as_its_offline_forward_and_leaves_other_streams_alone(
    kind_bundle: tuple[str, Path], how: str
) -> None:
    """A file's transforms (fitted on itself, heard beside the plain input) or a speaker's
    profile (fitted on earlier speech, heard alone), sent with the stream's first chunk."""
    _, bundle = kind_bundle
    runner = runner_for_bundle(str(bundle))
    model = load_networks(bundle)
    stride = model.config.time_stride
    heard, other, earlier = (
        featurize(_utterance(s, 1.3), model.config.features) for s in (0, 1, 2)
    )

    def first(c: F32, fitted: Any) -> Chunk:
        return Chunk(c, fitted) if how == "file" else Chunk(c, profile=fitted)

    async def main() -> tuple[F32, F32, F32]:
        fitted = await runner.fit_input(heard if how == "file" else earlier)
        d: BatchDispatcher[Chunk, F32] = BatchDispatcher(runner)
        d.start()

        async def stream(f: F32, fitted: Any) -> F32:
            sid, outs = d.open_stream(), []
            for i, (c, last) in enumerate(_chunks(f, 8, stride)):
                outs.append(await d.submit(sid, first(c, fitted) if i == 0 else Chunk(c), last))
            return np.concatenate(outs)

        try:
            a, b = await asyncio.gather(stream(heard, fitted), stream(other, None))
        finally:
            await d.stop()
        x, n = torch.from_numpy(heard)[None], torch.tensor([len(heard)])
        with torch.inference_mode():
            if how == "file":
                lp, n = model.forward(x, n, transforms=[fitted])
            else:
                lp, n = model.forward(x, n, profiles=[fitted])
        return a, b, lp[0, : int(n[0])].numpy()

    got, untouched, offline = asyncio.run(main())
    np.testing.assert_allclose(got, offline, atol=1e-4)
    assert not np.allclose(got, _whole(model, heard), atol=1e-3)  # the adaptation counted
    np.testing.assert_allclose(untouched, _whole(model, other), atol=1e-4)
    assert runner.streams == 0
    runner.close()


def test_the_fit_follows_the_servers_adaptation_settings(tiny_bundle: Path) -> None:
    model = load_bundle(tiny_bundle)
    feats = featurize(_utterance(0, 1.3), model.config.features)
    light = AdaptConfig(steps=2, rate=0.1)
    runner = runner_for_bundle(str(tiny_bundle), adaptation=light)
    got = asyncio.run(runner.fit_input(feats))
    want = fit_transforms(model, feats, (), light)
    np.testing.assert_allclose(got.gain, want.gain, atol=1e-6)
    assert not np.allclose(got.gain, fit_transforms(model, feats, ()).gain, atol=1e-6)
    runner.close()
    with pytest.raises(ValueError, match="adapt_steps must be >= 1"):
        ServerConfig(adapt_steps=0)
    with pytest.raises(ValueError, match="adapt_rate must be a positive number"):
        ServerConfig(adapt_rate=-0.1)


def test_input_transforms_are_refused_where_they_cannot_apply(warped_bundle: Path) -> None:
    runner = ModelRunner.from_bundle(str(warped_bundle))
    n_bins = runner.model.config.features.n_bins
    feats = np.full((8, n_bins), -8.0, np.float32)
    fitted = asyncio.run(runner.fit_input(feats))
    assert fitted.candidates == 3
    runner.run_sync([Work(1, Chunk(feats))])
    with pytest.raises(ValueError, match="first chunk only"):
        runner.run_sync([Work(1, Chunk(feats, fitted))])
    other = ModelRunner.from_bundle(str(warped_bundle), speaker_adaptation=False)
    with pytest.raises(ValueError, match="3 input transforms for a model with 1 warp"):
        other.run_sync([Work(2, Chunk(feats, fitted))])
    with pytest.raises(ValueError, match="at least one frame"):
        asyncio.run(other.fit_input(feats[:0]))
    runner.close()
    other.close()


def test_a_profile_that_comes_mid_stream_changes_what_follows_only(tiny_bundle: Path) -> None:
    runner = ModelRunner.from_bundle(str(tiny_bundle))
    model = load_bundle(tiny_bundle)
    stride = model.config.time_stride
    feats = featurize(_utterance(1, 1.3), model.config.features)
    profile = asyncio.run(runner.fit_input(featurize(_utterance(0, 1.3), model.config.features)))
    at = 2  # the profile comes with the third chunk
    outs = [
        runner.run_sync([Work(7, Chunk(c, profile=profile if i == at else None), last)])[0]
        for i, (c, last) in enumerate(_chunks(feats, 8, stride))
    ]
    # offline: the frames from the third chunk on heard through the profile
    heard = np.concatenate([feats[: at * 8], profile.apply(torch.from_numpy(feats[at * 8 :]), 0)])
    np.testing.assert_allclose(np.concatenate(outs), _whole(model, heard), atol=1e-4)
    before = sum(len(o) for o in outs[:at])
    np.testing.assert_allclose(
        np.concatenate(outs)[:before], _whole(model, feats)[:before], atol=1e-5
    )
    runner.close()


def test_a_profile_is_refused_where_it_cannot_apply(warped_bundle: Path) -> None:
    runner = ModelRunner.from_bundle(str(warped_bundle))
    n_bins = runner.model.config.features.n_bins
    feats = np.full((8, n_bins), -8.0, np.float32)
    fitted = asyncio.run(runner.fit_input(feats))
    runner.run_sync([Work(1, Chunk(feats, fitted))])  # a file heard through its transforms
    with pytest.raises(ValueError, match="takes no speaker profile"):
        runner.run_sync([Work(1, Chunk(feats, profile=fitted))])
    other = ModelRunner.from_bundle(str(warped_bundle), speaker_adaptation=False)
    with pytest.raises(ValueError, match="3 input transforms for a model with 1 warp"):
        other.run_sync([Work(2, Chunk(feats, profile=fitted))])
    runner.close()
    other.close()
