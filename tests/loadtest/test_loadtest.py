"""`harken loadtest` against real servers: results shape, finite latencies, failures with
their reasons, and runs that end by themselves within their bound."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.sync.server import ServerConnection, serve

import harken_cli
from loadtest.client import ClientConfig, Utterance
from loadtest.realtime import at_24k, realtime_utterance
from loadtest.report import RESULT_KEYS
from server.audio import Resampler
from server.config import ServerConfig
from tests.server.serving import Running, make_audio, pcm16, reference_text, running

FAST = ["--chunk-ms", "100", "--offset-s", "0.2", "--pause-s", "0.1", "--progress-s", "0.5"]


def loadtest(out: Path, manifest: Path, *args: str) -> tuple[int, float]:
    """Run `harken loadtest` in-process; (exit status, wall seconds)."""
    start = time.monotonic()
    status = harken_cli.main(
        ["loadtest", "--manifest", str(manifest), "--out", str(out), *FAST, *args]
    )
    return status, time.monotonic() - start


def results(out: Path) -> list[dict[str, Any]]:
    data = json.loads((out / "results.json").read_text())
    assert list(data) == ["results"]
    for r in data["results"]:
        assert tuple(r) == RESULT_KEYS
    return list(data["results"])


def reasons(out: Path) -> dict[str, int]:
    levels = json.loads((out / "details.json").read_text())["levels"]
    merged: dict[str, int] = {}
    for level in levels:
        for reason, count in level["failure_reasons"].items():
            merged[reason] = merged.get(reason, 0) + count
    return merged


def test_sweep_measures_latency_batches_and_wer(
    server: Running, manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, wall = loadtest(
        tmp_path, manifest, "--url", server.ws, "--streams", "1,2", "--seconds", "1.5"
    )
    assert status == 0
    levels = results(tmp_path)
    assert [r["streams"] for r in levels] == [1, 2]
    for r in levels:
        assert r["utterances"] >= r["streams"] and r["failures"] == 0
        latencies = [r[k] for k in ("p50_ms", "p90_ms", "p98_ms", "p99_ms", "max_ms")]
        assert all(math.isfinite(x) and x > 0 for x in latencies)
        assert latencies == sorted(latencies)
        assert math.isfinite(r["first_partial_p50_ms"]) and r["first_partial_p50_ms"] > 0
        assert 0 <= r["wer"] < math.inf
        assert sum(r["batch_sizes"].values()) > 0
        assert all(1 <= int(size) <= 2 for size in r["batch_sizes"])  # never above the load
    for name in ("report.md", "details.json", "run.json", "batch_sizes.png", "latency.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "latency.png").read_bytes()[:4] == b"\x89PNG"
    assert "| streams | utterances |" in (tmp_path / "report.md").read_text()
    assert "[  2 streams]" in capsys.readouterr().err  # live progress
    # the server's own latency (from its histogram) and the load generator's CPU share
    details = json.loads((tmp_path / "details.json").read_text())["levels"]
    for r, d in zip(levels, details, strict=True):
        assert 0 < d["loadgen_cpu_share"] < 1
        assert 0 < d["server_p50_ms"] <= d["server_p98_ms"]
        # eos received -> final sent inside the server cannot be slower than the client's view
        # of eos sent -> final received (bar the histogram's bucket interpolation)
        assert d["server_p50_ms"] <= r["p50_ms"] * 1.5 + 5
    assert "load generator CPU" in (tmp_path / "report.md").read_text()
    # 2 levels of 1.5 s, the 0.2 s offsets, the last utterances (at most 1.2 s) and finals
    assert wall < 15


@pytest.mark.parametrize("protocol", ["realtime", "vosk"])
def test_a_sweep_speaks_the_protocol_it_is_given(
    server: Running, manifest: Path, tmp_path: Path, protocol: str
) -> None:
    status, _ = loadtest(
        tmp_path, manifest, "--url", server.ws, "--streams", "2", "--seconds", "1.5",
        "--protocol", protocol,
    )  # fmt: skip
    assert status == 0
    (r,) = results(tmp_path)
    assert r["utterances"] >= 2 and r["failures"] == 0
    assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("p50_ms", "p98_ms"))
    assert 0 <= r["wer"] < math.inf
    if protocol == "realtime":  # its deltas are its partials
        assert math.isfinite(r["first_partial_p50_ms"]) and r["first_partial_p50_ms"] > 0
    assert json.loads((tmp_path / "run.json").read_text())["protocol"] == protocol
    served = f'harken_streams_total{{endpoint="{protocol}"}}'
    assert served in httpx.get(f"{server.url}/metrics").text


def test_the_realtime_client_gets_the_transcript_of_what_it_sent(
    server: Running, tiny_bundle: Path
) -> None:
    """At 8 kHz, resampled to OpenAI's 24 kHz by the client and to 16 kHz by the server: the
    offline transcript of those 24 kHz samples."""
    pcm = pcm16(make_audio(1.2, 8000, seed=2))
    utt = Utterance(pcm, 8000, "reference", "u.wav")
    result = asyncio.run(realtime_utterance(ClientConfig(url=server.ws, chunk_ms=100), utt))
    assert result.ok and result.eou_latency_ms is not None and result.eou_latency_ms > 0
    sent = np.frombuffer(at_24k(utt).pcm, "<i2").astype(np.float32) / 32768
    assert result.hypothesis == reference_text(
        tiny_bundle, Resampler(24000, 16000).push(sent, True)
    )
    assert result.hypothesis and result.failure is None


def test_unreachable_server_fails_with_its_reason_and_stops(manifest: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status, wall = loadtest(
        tmp_path, manifest, "--url", f"ws://127.0.0.1:{port}", "--streams", "2", "--seconds", "1"
    )
    assert status == 1
    (r,) = results(tmp_path)
    assert r["utterances"] == 0 and r["failures"] >= 2 and r["p50_ms"] is None
    assert r["batch_sizes"] == {}
    assert set(reasons(tmp_path)) == {"unreachable: connection refused"}
    assert "connection refused" in (tmp_path / "report.md").read_text()
    assert wall < 5


def test_rejected_streams_are_failures_with_the_servers_reason(
    tiny_bundle: Path, manifest: Path, tmp_path: Path
) -> None:
    with running(
        ServerConfig(dtype="fp32", bundle=str(tiny_bundle), chunk_ms=80, max_streams=1)
    ) as one:
        status, _ = loadtest(
            tmp_path, manifest, "--url", one.ws, "--streams", "3", "--seconds", "1.5"
        )
    assert status == 1
    (r,) = results(tmp_path)
    assert r["utterances"] >= 1 and r["failures"] >= 1
    got = reasons(tmp_path)
    assert any(reason.startswith("server error overloaded") for reason in got), got


@contextmanager
def silent_server() -> Iterator[str]:
    """A WebSocket server that takes everything and never answers."""

    def swallow(ws: ServerConnection) -> None:
        for _ in ws:
            pass

    with serve(swallow, "127.0.0.1", 0) as ws_server:
        thread = threading.Thread(target=ws_server.serve_forever, daemon=True)
        thread.start()
        yield f"ws://127.0.0.1:{ws_server.socket.getsockname()[1]}"
        ws_server.shutdown()
        thread.join(5)


def test_a_server_that_never_answers_times_out_and_the_run_ends(
    manifest: Path, tmp_path: Path
) -> None:
    with silent_server() as url:
        status, wall = loadtest(
            tmp_path,
            manifest,
            *("--url", url, "--streams", "1", "--seconds", "0.5", "--speed", "4"),
            *("--final-timeout-s", "0.5"),
        )
    assert status == 1
    (r,) = results(tmp_path)
    assert r["utterances"] == 0 and r["failures"] >= 1
    assert set(reasons(tmp_path)) == {"timeout: no final within 0.5 s of eos"}
    assert wall < 5


def test_compare_policies_on_given_servers(
    tiny_bundle: Path, manifest: Path, tmp_path: Path
) -> None:
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), chunk_ms=80)
    with running(config) as eager, running(config.replace(policy="none")) as none:
        status, _ = loadtest(
            tmp_path,
            manifest,
            *("--compare-policies", "--url", eager.ws, "--url", none.ws),
            *("--labels", "eager,none", "--streams", "2", "--seconds", "1", "--speed", "2"),
            *("--bound-ms", "10000"),
        )
    assert status == 0
    compare = json.loads((tmp_path / "compare.json").read_text())
    assert compare["sustained_streams"] == {"eager": 2, "none": 2}
    assert compare["ratios"] == {"eager/none": 1.0, "none/eager": 1.0}
    for name in ("eager", "none"):
        (r,) = results(tmp_path / name)
        assert r["utterances"] >= 2 and r["failures"] == 0
        if name == "none":
            assert set(r["batch_sizes"]) == {"1"}  # `none` runs one stream per step
    assert (tmp_path / "compare_latency.png").read_bytes()[:4] == b"\x89PNG"
    assert "eager/none" in (tmp_path / "compare.md").read_text()


def test_compare_policies_starts_its_own_server(
    tiny_bundle: Path, manifest: Path, tmp_path: Path
) -> None:
    status, _ = loadtest(
        tmp_path,
        manifest,
        *("--compare-policies", "--policies", "timeout", "--streams", "1", "--seconds", "1"),
        f"--serve-args=--bundle {tiny_bundle} --chunk-ms 80 --log-level info",
    )
    assert status == 0
    (r,) = results(tmp_path / "timeout")
    assert r["utterances"] >= 1 and r["failures"] == 0
    log = (tmp_path / "timeout" / "server.log").read_text()
    assert "--policy timeout" in log
    assert "model precision" in log  # the start-up facts reach the log
    assert "Traceback" not in log  # a SIGINT stop is a clean stop
    assert json.loads((tmp_path / "compare.json").read_text())["sustained_streams"] == {
        "timeout": 1
    }


def test_a_server_that_will_not_start_is_a_clear_error(
    manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = loadtest(
        tmp_path,
        manifest,
        *("--compare-policies", "--policies", "eager", "--streams", "1", "--seconds", "1"),
        ("--serve-args=--no-such-flag"),
    )
    assert status == 2
    err = capsys.readouterr().err
    assert "harken serve exited with 2" in err and "--no-such-flag" in err


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --url"),
        (["--url", "ws://a:1", "--url", "ws://b:1"], "only with --compare-policies"),
        (["--url", "http://a:1"], "ws:// or wss://"),
        (["--url", "ws://a:1", "--chunk-ms", "10"], "20..200"),
        (["--url", "ws://a:1", "--streams", "0,2"], "positive integers"),
        (["--url", "ws://a:1", "--speed", "0"], "speed must be > 0"),
    ],
)
def test_bad_arguments_say_what_to_change(
    args: list[str],
    message: str,
    manifest: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert harken_cli.main(["loadtest", "--manifest", str(manifest), *args]) == 2
    assert message in capsys.readouterr().err


def test_the_policies_compared_are_the_servers() -> None:
    """loadtest talks to the server over the network only, so it keeps its own list of the
    policies to launch; this keeps it from drifting from what `harken serve` accepts."""
    from loadtest.compare import POLICIES as COMPARED
    from server.dispatch import POLICIES as SERVED

    assert tuple(COMPARED) == tuple(SERVED)
