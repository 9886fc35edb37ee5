"""`harken loadtest --profile`: py-spy's raw stacks land in the right stages, the per-stage
arithmetic is the documented one, and a short profile of a real server finds the model and
the decoder at work."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
from pathlib import Path

import pytest

import harken_cli
from loadtest.client import UtteranceResult
from loadtest.profile import find_py_spy
from loadtest.profile_report import Window, markdown, summarize
from loadtest.report import Level
from loadtest.stages import IDLE, STAGES, by_role, classify, parse, parse_line, tally

# Stacks as `py-spy record --subprocesses --threads --format raw` writes them for a server
# started by loadtest/launch.py (whose `-c` command line holds a ';', as a multiprocessing
# child's does), cut where the middle adds nothing.
SERVER = (
    'process 812:"/srv/.venv/bin/python3 -c import sys, harken_cli; '
    'sys.exit(harken_cli.main(sys.argv[1:])) serve --port 8123"'
)
CHILD = (
    SERVER + ';process 840:"/srv/.venv/bin/python3 -B -c from multiprocessing.spawn import '
    'spawn_main; spawn_main(tracker_fd=9, pipe_handle=12) --multiprocessing-fork";'
    "thread (840): MainThread;<module> (<string>:1);spawn_main (multiprocessing/spawn.py:122);"
    "_main (multiprocessing/spawn.py:135);BaseProcess.run (multiprocessing/process.py:108)"
)
LOOP = (
    SERVER + ";thread (812): MainThread;<module> (<string>:1);main (harken_cli.py:70);"
    "main (server/cli_serve.py:28);Server.run (uvicorn/server.py:86);"
    "BaseEventLoop.run_forever (asyncio/base_events.py:607);"
    "BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"
)
APP = (
    LOOP + ";WebSocketsSansIOProtocol.run_asgi "
    "(uvicorn/protocols/websockets/websockets_sansio_impl.py:409);"
    "Starlette.__call__ (starlette/applications.py:96);Router.__call__ (starlette/routing.py:683);"
    "WebSocketRoute.handle (starlette/routing.py:363);stream (server/ws_stream.py:45);"
    "_serve (server/ws_stream.py:61)"
)
WORKER = (
    "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982);"
    "_worker (concurrent/futures/thread.py:83);_WorkItem.run (concurrent/futures/thread.py:58)"
)
MODEL = SERVER + ";thread (815): model_0;" + WORKER
DECODER = SERVER + ";thread (820): decoder1_0;" + WORKER

KNOWN = {
    "model_step": [
        MODEL + ";ModelRunner.run_sync (server/runner.py:122);ModelRunner._step "
        "(server/runner.py:191);step (models/streaming.py:204);_advance (models/streaming.py:164);"
        "RecurrentLayer.scan (models/ds2.py:204);RecurrentLayer._cell (models/ds2.py:243);"
        "Module._call_impl (torch/nn/modules/module.py:1789);Linear.forward "
        "(torch/nn/modules/linear.py:134) 124",
        # the model thread handing its result to the loop is still the model's cost
        SERVER + ";thread (815): model_0;Thread.run (threading.py:982);_WorkItem.run "
        "(concurrent/futures/thread.py:64);Future.set_result (concurrent/futures/_base.py:550);"
        "BaseEventLoop.call_soon_threadsafe (asyncio/base_events.py:812);"
        "BaseSelectorEventLoop._write_to_self (asyncio/selector_events.py:139) 37",
        LOOP + ";BatchDispatcher._loop (server/dispatch.py:227);BatchDispatcher._run "
        "(server/dispatch.py:262);ModelRunner.run (server/runner.py:102);"
        "BaseEventLoop.run_in_executor (asyncio/base_events.py:829) 5",
    ],
    "decoder_advance": [
        CHILD + ";_serve (server/decoder_procs.py:68);BeamStream.advance (decoder/beam.py:173);"
        "step (decoder/step.py:65) 25",
        CHILD + ";_serve (server/decoder_procs.py:68);BeamStream.advance (decoder/beam.py:170);"
        "PrefixScorer.extend (decoder/scorer.py:88);KenLM.score (decoder/lm.py:120) 7",
    ],
    "decoder_partial": [
        CHILD + ";_serve (server/decoder_procs.py:68);BeamStream.partial (decoder/beam.py:267);"
        "BeamStream._texts (decoder/beam.py:247);PrefixTree.texts (decoder/prefixes.py:98) 2",
    ],
    "decoder_finalize": [
        CHILD + ";_serve (server/decoder_procs.py:66);BeamStream.finalize (decoder/beam.py:280);"
        "PrefixScorer.finals (decoder/scorer.py:113);PrefixScorer._lookup "
        "(decoder/scorer.py:149) 1",
    ],
    "decoder_ipc": [
        DECODER + ";_RemoteStream.advance (server/decoder_procs.py:151);_Child.call "
        "(server/decoder_procs.py:110);_ConnectionBase.send (multiprocessing/connection.py:206);"
        "Connection._send_bytes (multiprocessing/connection.py:427);Connection._send "
        "(multiprocessing/connection.py:384) 19",
        CHILD + ";_serve (server/decoder_procs.py:53);_ConnectionBase.recv "
        "(multiprocessing/connection.py:251) 2",
    ],
    "audio_features": [
        APP + ";Session.feed (server/session.py:156);Session._add_frames "
        "(server/session.py:240);StreamingFeaturizer.push (models/features.py:192);"
        "_log_power (models/features.py:52);rfft (numpy/fft/_pocketfft.py:414) 5",
        APP + ";audio_frame (server/transport.py:98);decode_pcm (server/audio.py:52) 5",
    ],
    "ws_receive": [
        LOOP + ";_SelectorSocketTransport._read_ready (asyncio/selector_events.py:1005);"
        "_SelectorSocketTransport._read_ready__data_received (asyncio/selector_events.py:1049);"
        "WebSocketsSansIOProtocol.data_received "
        "(uvicorn/protocols/websockets/websockets_sansio_impl.py:196);"
        "WebSocketsSansIOProtocol.handle_events "
        "(uvicorn/protocols/websockets/websockets_sansio_impl.py:205);"
        "WebSocketsSansIOProtocol.handle_bytes "
        "(uvicorn/protocols/websockets/websockets_sansio_impl.py:287);"
        "RefusingWebSocketProtocol.send_receive_event_to_app (server/ws_frames.py:171) 1",
        LOOP + ";ServerProtocol.parse (websockets/server.py:520);Protocol.parse "
        "(websockets/protocol.py:600);Frame.parse (websockets/frames.py:332) 1",
        APP + ";receive (server/transport.py:62);wait_for (asyncio/tasks.py:466) 1",
    ],
    "send": [
        APP + ";WebSocket.send_json (starlette/websockets.py:182);WebSocket.send "
        "(starlette/websockets.py:92);RefusingWebSocketProtocol.send (server/ws_frames.py:127);"
        "WebSocketsSansIOProtocol.send (uvicorn/protocols/websockets/websockets_sansio_impl.py:506);"
        "_SelectorSocketTransport.write (asyncio/selector_events.py:1057) 3",
        APP + ";Session.finish (server/session.py:172);Session._final (server/session.py:312);"
        "_words (server/session.py:358);BaseModel.__init__ (pydantic/main.py:250) 1",
    ],
    "other": [
        # the whole app runs under uvicorn's run_asgi: that frame alone is no WebSocket receive
        APP + ";Session.feed (server/session.py:153);Session._run_full_chunks "
        "(server/session.py:257);Session._step (server/session.py:275);DecoderPool.submit "
        "(server/decoding.py:109);BaseEventLoop.run_in_executor (asyncio/base_events.py:829);"
        "ThreadPoolExecutor.submit (concurrent/futures/thread.py:175) 7",
        LOOP + ";BatchDispatcher.submit (server/dispatch.py:198);BatchDispatcher.enqueue "
        "(server/dispatch.py:185) 2",
        # an HTTP request (a handshake, a /metrics scrape) arrives by the same socket reads
        LOOP + ";_SelectorSocketTransport._read_ready (asyncio/selector_events.py:952);"
        "_SelectorSocketTransport._read_ready__data_received (asyncio/selector_events.py:1009);"
        "H11Protocol.data_received (uvicorn/protocols/http/h11_impl.py:176);"
        "H11Protocol.handle_events (uvicorn/protocols/http/h11_impl.py:224);"
        "ConnectionState.process_event (h11/_state.py:291) 1",
    ],
    IDLE: [
        LOOP + ";EpollSelector.select (selectors.py:468) 120",
        CHILD + ";_serve (server/decoder_procs.py:53);_ConnectionBase.recv "
        "(multiprocessing/connection.py:250);Connection._recv_bytes "
        "(multiprocessing/connection.py:430);Connection._recv (multiprocessing/connection.py:395) 90",
        DECODER + ";_RemoteStream.advance (server/decoder_procs.py:151);_Child.call "
        "(server/decoder_procs.py:111);_ConnectionBase.recv (multiprocessing/connection.py:250);"
        "Connection._recv_bytes (multiprocessing/connection.py:430);Connection._recv "
        "(multiprocessing/connection.py:395) 13",
        MODEL.removesuffix(";_WorkItem.run (concurrent/futures/thread.py:58)").replace(
            "thread.py:83", "thread.py:81"
        )
        + " 34",
    ],
}


@pytest.mark.parametrize(
    ("stage", "line"), [(stage, line) for stage, lines in KNOWN.items() for line in lines]
)
def test_known_stacks_land_in_their_stage(stage: str, line: str) -> None:
    stack = parse_line(line)
    assert stack is not None
    assert classify(stack) == stage


def test_raw_lines_parse_into_processes_threads_and_frames() -> None:
    child = parse_line(KNOWN["decoder_advance"][0])
    assert child is not None and child.count == 25 and child.child
    assert child.process.startswith('840:"') and child.process.endswith('--multiprocessing-fork"')
    assert child.thread == "MainThread"
    assert (child.frames[-1].function, child.frames[-1].file, child.frames[-1].line) == (
        "step",
        "decoder/step.py",
        65,
    )
    model = parse_line(KNOWN["model_step"][0])
    assert model is not None and not model.child and model.thread == "model_0"
    assert model.frames[0].function == "Thread._bootstrap"  # the server's ';' kept its token
    bare = parse_line("main (app.py:3);work (app.py:9) 4")  # recorded without --threads
    assert bare is not None and bare.thread == "" and len(bare.frames) == 2
    assert parse_line("") is None and parse_line("no count here") is None


def test_tally_and_workers_count_every_sample_once() -> None:
    stacks = parse("\n".join(line for lines in KNOWN.values() for line in lines))
    counts = tally(stacks)
    assert list(counts) == list(STAGES)
    assert sum(counts.values()) == sum(s.count for s in stacks)
    assert counts["model_step"] == 124 + 37 + 5 and counts[IDLE] == 120 + 90 + 13 + 34
    roles = by_role(stacks)
    assert IDLE not in roles and sum(roles.values()) == sum(counts.values()) - counts[IDLE]
    assert roles["model thread"] == 124 + 37 and roles["decoder threads"] == 19


def test_ms_per_audio_second_and_shares() -> None:
    model = parse_line(MODEL + ";ModelRunner.run_sync (server/runner.py:122) 300")
    advance = parse_line(
        CHILD + ";_serve (server/decoder_procs.py:68);BeamStream.advance (decoder/beam.py:173) 100"
    )
    idle = parse_line(LOOP + ";EpollSelector.select (selectors.py:468) 50")
    assert model is not None and advance is not None and idle is not None
    utterances = [UtteranceResult("a", 12.0, "a", 20.0), UtteranceResult("b", 8.0, "b", 30.0)]
    level = Level(2, utterances, {"1": 30, "2": 10}, wall_s=10.0)
    window = Window(level, [model, advance, idle], 100, 3.9, 0.2, 0.3, 450, 0)
    s = summarize(
        window,
        {"cores": 2, "command": "c", "date": "d", "url": "u"}
        | {"server_pid": 1, "server_started_here": True, "machine": {"cpu": "cpu"}},
    )
    stages = {r["stage"]: r for r in s["stages"]}
    # 300 samples at 100 Hz = 3 s of CPU over 20 s of audio: 150 ms per audio second
    assert stages["model_step"]["ms_per_audio_s"] == pytest.approx(150.0)
    assert stages["model_step"]["share"] == pytest.approx(0.75)
    assert stages["decoder_advance"]["ms_per_audio_s"] == pytest.approx(50.0)
    assert s["total_ms_per_audio_s"] == pytest.approx(200.0)
    assert s["streams_for_cores"] == pytest.approx(10.0)  # 2 cores x 1000 ms / 200 ms
    assert s["sampling"]["idle_samples"] == 50 and s["sampling"]["cpu_samples"] == 400
    assert s["load"]["mean_batch"] == pytest.approx(50 / 40)
    assert s["workers"]["model thread"]["cores"] == pytest.approx(0.3)  # 3 s over 10 s
    assert "| model_step |" in markdown(s)


@pytest.fixture(scope="module")
def py_spy() -> str:
    spy = find_py_spy()
    if spy is None:
        pytest.skip("py-spy is not installed (the bench extra has it)")
    return spy


def test_profile_of_a_tiny_server_finds_the_model_and_decoder(
    py_spy: str,
    tiny_bundle: Path,
    manifest: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    serve = f"--bundle {shlex.quote(str(tiny_bundle))} --dtype fp32 --chunk-ms 80"
    serve += " --decoder-workers 1 --max-streams 8"
    status = harken_cli.main(
        ["loadtest", "--profile", "--manifest", str(manifest), "--out", str(tmp_path)]
        + ["--streams", "3", "--seconds", "4", "--rate", "250", "--offset-s", "0.2"]
        + ["--progress-s", "0", f"--serve-args={serve}", "--py-spy", py_spy]
    )
    if status == 2 and "could not attach" in (err := capsys.readouterr().err):
        pytest.skip(f"py-spy may not attach here: {err.strip()}")
    assert status == 0
    profile = json.loads((tmp_path / "profile.json").read_text())
    stages = {r["stage"]: r for r in profile["stages"]}
    assert stages["model_step"]["samples"] > 0 and stages["decoder_advance"]["samples"] > 0
    assert math.isclose(sum(r["share"] for r in profile["stages"]), 1.0, abs_tol=1e-3)
    assert profile["load"]["utterances"] >= 3 and profile["load"]["batch_sizes"]
    assert profile["sampling"]["server_cpu_s"] > 0 and profile["total_ms_per_audio_s"] > 0
    assert (tmp_path / "stacks.txt").stat().st_size > 0
    assert "model_step" in (tmp_path / "profile.md").read_text()
    assert "Uvicorn running" in (tmp_path / "server.log").read_text()  # the server it started


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--streams", "1,2"], "one --streams value"),
        (["--streams", "2", "--url", "ws://127.0.0.1:9"], "needs --server-pid"),
        (["--streams", "2", "--server-pid", "1"], "goes with --url"),
        (["--streams", "2", "--rate", "0"], "--rate must be"),
        (
            ["--streams", "2", "--url", "ws://127.0.0.1:9", "--server-pid", str(os.getpid())]
            + ["--serve-args=--port 1"],
            "drop it",
        ),
        (["--streams", "2", "--py-spy", "/nonexistent/py-spy"], "cannot run py-spy"),
    ],
)
def test_bad_arguments_say_what_to_change(
    args: list[str], says: str, manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["loadtest", "--profile", "--manifest", str(manifest), "--out", str(tmp_path)]
    if says == "cannot run py-spy":  # gets as far as starting it
        args += ["--url", "ws://127.0.0.1:9", "--server-pid", str(os.getpid())]
    assert harken_cli.main(common + args) == 2
    assert says in capsys.readouterr().err


def test_a_process_py_spy_cannot_sample_is_an_error_with_the_reason(
    py_spy: str, manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])  # no Python interpreter in it to sample
    try:
        status = harken_cli.main(
            ["loadtest", "--profile", "--manifest", str(manifest), "--out", str(tmp_path)]
            + ["--streams", "1", "--url", "ws://127.0.0.1:9", "--server-pid", str(sleeper.pid)]
            + ["--py-spy", py_spy]
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    assert status == 2
    err = capsys.readouterr().err
    assert f"py-spy could not attach to pid {sleeper.pid}: Error: No python processes" in err
    assert (tmp_path / "py-spy.log").read_text().startswith(py_spy)  # its own words kept
