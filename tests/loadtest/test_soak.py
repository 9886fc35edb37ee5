"""`harken loadtest --soak`: one short soak against a real server it starts on the tiny
bundle, with all three protocols and every fault compressed into ~24 s; its arguments; and
the pure parts (/proc parsing, RSS growth, windows, attribution of failures to faults)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

import harken_cli
from loadtest import procstats
from loadtest.faults import metric
from loadtest.records import FaultEvent, Record
from loadtest.soak_report import SoakRun, drift, rss_growth, summarize, windows
from tests.server.serving import make_audio, pcm16, reference_text

SOAK_S = 24.0
SAMPLE_S = 2.0
# (seconds, seed): 16 kHz utterances, so the offline reference needs no resampling
AUDIO = [(1.5, 0), (1.0, 1), (1.2, 2)]
SERVE = "--dtype fp32 --chunk-ms 80 --max-streams 8 --send-timeout-s 1 --log-level warning"
SAMPLE_KEYS = {
    "t_s", "loadgen_cpu_s", "client_open", "active_streams", "rss_kb", "server_rss_kb",
    "children_rss_kb", "fds", "threads", "children", "decoders", "server_cpu_s", "processes",
}  # fmt: skip


@pytest.fixture(scope="module")
def offline(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A manifest whose transcripts are what the bundle gives offline for each file (so the
    soak's WER is 0 when every final equals it); and those transcripts by file."""
    root = tmp_path_factory.mktemp("soak_manifest")
    texts, lines = {}, []
    for i, (seconds, seed) in enumerate(AUDIO):
        pcm = pcm16(make_audio(seconds, 16000, seed))
        sf.write(root / f"u{i}.wav", np.frombuffer(pcm, "<i2"), 16000, subtype="PCM_16")
        quantised = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
        texts[f"u{i}.wav"] = reference_text(tiny_bundle, quantised)
        lines.append(json.dumps({"audio": f"u{i}.wav", "text": texts[f"u{i}.wav"]}))
    (root / "test.jsonl").write_text("\n".join(lines) + "\n")
    return root / "test.jsonl", texts


@pytest.fixture(scope="module")
def soak(
    tiny_bundle: Path, offline: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One soak: 3 clients (one per protocol) for 24 s, every fault on, then SIGTERM."""
    manifest, _ = offline
    out = tmp_path_factory.mktemp("soak")
    began = time.monotonic()
    status = harken_cli.main(
        ["loadtest", "--soak", "--manifest", str(manifest), "--out", str(out)]
        + ["--streams", "3", "--mix", "stream,vosk,rest", "--soak-minutes", str(SOAK_S / 60)]
        + ["--sample-s", str(SAMPLE_S), "--window-s", "5", "--fault-window-s", "2"]
        + ["--stall-wait-s", "10", "--offset-s", "0.5", "--progress-s", "0", "--note", "test"]
        + [f"--serve-args=--bundle {tiny_bundle} {SERVE}"]
    )
    data = json.loads((out / "soak.json").read_text())
    records = [json.loads(line) for line in (out / "streams.jsonl").read_text().splitlines()]
    wall = time.monotonic() - began
    return {"status": status, "out": out, "wall": wall, "records": records, **data}


def test_the_soak_passes_and_writes_its_report(soak: dict[str, Any]) -> None:
    assert soak["status"] == 0, soak["summary"]["targets"]
    out = soak["out"]
    assert (out / "soak.png").read_bytes()[:4] == b"\x89PNG"
    text = (out / "soak.md").read_text()
    for part in ("## Targets: held", "RSS growth after warm-up", "| stream |", "| vosk |"):
        assert part in text
    assert "note: `test`" in text and "model batch that raises" in text
    assert soak["meta"]["machine"]["cpu"]
    assert soak["failures"] == [r for r in soak["records"] if r["tag"] == "load" and r["failure"]]
    windows_seen = [w for w in soak["windows"] if {"stream", "vosk", "rest"} <= set(w)]
    assert windows_seen
    for w in windows_seen:
        for protocol in ("stream", "vosk", "rest"):
            row = w[protocol]
            assert row["finals"] == 0 or 0 < row["p50_ms"] <= row["p98_ms"]
    # server start, 24 s of load, the shutdown; nothing waits out a long bound
    assert soak["wall"] < SOAK_S + 30


def test_samples_cover_the_run_with_the_process_tree(soak: dict[str, Any]) -> None:
    samples = soak["samples"]
    assert len(samples) >= SOAK_S / SAMPLE_S - 1
    for s in samples:
        assert set(s) >= SAMPLE_KEYS, set(s) ^ SAMPLE_KEYS
        assert s["rss_kb"] == s["server_rss_kb"] + s["children_rss_kb"] > 0
        assert s["fds"] > 0 and s["threads"] >= 2 and s["server_cpu_s"] > 0
        assert s["processes"][0]["role"] == "server"
    assert [s["t_s"] for s in samples] == sorted(s["t_s"] for s in samples)
    assert samples[-1]["server_cpu_s"] > samples[0]["server_cpu_s"]
    assert any(s["active_streams"] for s in samples)


def test_every_stream_no_fault_touched_got_the_offline_transcript(
    soak: dict[str, Any], offline: tuple[Path, dict]
) -> None:
    _, texts = offline
    load = [r for r in soak["records"] if r["tag"] == "load"]
    assert {r["protocol"] for r in load} == {"stream", "vosk", "rest"}
    calm = [r for r in load if r["fault"] is None]
    assert len(calm) >= 20
    wrong = [r for r in calm if r["failure"] or r["text"] != texts[r["utterance"]]]
    assert not wrong
    assert all(r["latency_ms"] > 0 for r in calm)
    for protocol, row in soak["summary"]["protocols"].items():
        assert row["wer"] == 0.0, protocol
    # each failure is put down to a fault of the kind that fails streams that way
    for r in load:
        if r["failure"]:
            expected = {"kill": "decoder", "burst": "overloaded"}[r["fault"]]
            assert expected in r["failure"]


def test_each_fault_was_injected_and_held(soak: dict[str, Any]) -> None:
    faults = {f["name"]: f for f in soak["faults"]}
    assert list(faults) == ["kill", "vanish", "stall", "burst", "term"]
    assert all(f["held"] and not f["skipped"] for f in faults.values())
    lines = {f["name"]: f for f in soak["summary"]["faults"]}
    assert all(line["held"] for line in lines.values()), [v["line"] for v in lines.values()]
    assert all(faults[n]["readyz"] == "200" for n in ("kill", "vanish", "stall", "burst"))
    tags = [r["tag"] for r in soak["records"]]
    assert tags.count("vanish") == 1 and tags.count("stall") == 1
    stalled = next(r for r in soak["records"] if r["tag"] == "stall")
    assert stalled["failure"].startswith("dropped")
    assert "refused with a reason" in faults["burst"]["outcome"]
    assert faults["term"]["details"]["exit_code"] in (0, -signal.SIGTERM)
    assert faults["term"]["readyz"] != "200"


def test_the_killed_decoder_worker_was_replaced(soak: dict[str, Any]) -> None:
    kill = next(f for f in soak["faults"] if f["name"] == "kill")
    victim, replacement = kill["details"]["victim"], kill["details"]["replacement"]
    assert replacement and replacement != victim
    first, after = soak["samples"][0], [s for s in soak["samples"] if s["t_s"] > kill["end_s"]]
    assert after and first["decoders"] == 2
    assert all(s["decoders"] == 2 and s["children"] == first["children"] for s in after)
    pids = {p["pid"] for p in after[-1]["processes"] if p["role"] == "decoder"}
    assert replacement in pids and victim not in pids


@pytest.mark.parametrize(
    "args, message",
    [
        (["--streams", "1,2"], "one --streams value"),
        (["--streams", "3", "--mix", "stream,grpc"], "--mix takes names among"),
        (["--streams", "3", "--faults", "kill,fire"], "--faults takes names among"),
        (["--streams", "3", "--soak-minutes", "0"], "--soak-minutes must be > 0"),
        (["--streams", "3", "--soak-minutes", "1", "--sample-s", "60"], "shorter than the soak"),
        (["--streams", "3", "--server-pid", "1"], "--server-pid goes with --url"),
        (["--streams", "3", "--url", "ws://a:1", "--server-pid", "999999999"], "no such process"),
        (["--streams", "3", "--compare-policies"], "separate runs"),
        (["--streams", "3", "--serve-args=--max-streams lots"], "take numbers"),
    ],
)
def test_bad_arguments_say_what_to_change(
    args: list[str],
    message: str,
    offline: tuple[Path, dict],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    manifest, _ = offline
    argv = ["loadtest", "--soak", "--manifest", str(manifest), "--out", str(tmp_path), *args]
    assert harken_cli.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "soak.json").exists()


# -- /proc ----------------------------------------------------------------------------------


def test_stat_lines_parse_whatever_the_command_name() -> None:
    # a name with spaces and parentheses; utime 250, stime 50, cutime 100, cstime 0 ticks
    line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 9 0 0 0 250 50 100 0 20 0 7 0 1 2 3"
    stat = procstats.parse_stat(line, ticks=100)
    assert (stat.pid, stat.state, stat.ppid) == (4242, "S", 17)
    assert stat.cpu_s == 3.0 and stat.children_cpu_s == 1.0
    status = procstats.parse_status("Name:\tpython\nVmRSS:\t  12345 kB\nThreads:\t7\n")
    assert procstats.kib(status["VmRSS"]) == 12345 and status["Threads"] == "7"
    assert procstats.kib(None) == 0  # a zombie has no VmRSS


def test_descendants_and_roles() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 10, 13: 11, 20: 1}
    assert procstats.descendants(parents, 10) == [11, 12, 13]
    assert procstats.descendants(parents, 20) == []
    spawned = "python -B -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=9)"
    assert procstats.role(spawned) == "decoder"
    tracker = "python -B -c from multiprocessing.resource_tracker import main;main(8)"
    assert procstats.role(tracker) == "tracker"
    assert procstats.role("sleep 30") == "other"


def test_the_tree_of_this_process_from_proc() -> None:
    """Real children: a spawned multiprocessing worker (how the server starts its decoders)
    and a plain subprocess; the worker killed is a zombie, no longer a live decoder."""
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(30,))
    worker.start()
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while worker.pid not in procstats.read_tree(os.getpid()).decoders:
            assert time.monotonic() < deadline, "the spawned worker never showed up"
            time.sleep(0.05)
        tree = procstats.read_tree(os.getpid())
        assert tree.server.pid == os.getpid() and tree.server.role == "server"
        children = {p.pid: p for p in tree.children}
        assert children[plain.pid].role == "other"
        assert all(p.rss_kb > 0 and p.fds > 0 and p.threads >= 1 for p in tree.processes)
        assert tree.total("rss_kb") == sum(p.rss_kb for p in tree.processes)
        os.kill(worker.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while procstats.alive(worker.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert worker.pid not in procstats.read_tree(os.getpid()).decoders
    finally:
        plain.kill()
        plain.wait()
        worker.kill()
        worker.join()
    with pytest.raises(ProcessLookupError):
        procstats.read_tree(plain.pid)


# -- judging --------------------------------------------------------------------------------


def record(start: float, latency: float | None = 10.0, failure: str | None = None) -> Record:
    """A load stream of /v1/stream lasting 2 s; without a failure, it got the text "a b"."""
    text = "" if failure else "a b"
    return Record(0, "stream", "load", "u0.wav", "a b", start, start + 2.0, latency, text, failure)


def run_of(
    records: list[Record],
    samples: Sequence[dict[str, Any]] = (),
    faults: Sequence[FaultEvent] = (),
    duration: float = 600.0,
) -> SoakRun:
    """A 10-minute run: 60 s windows, 10 s either side of a fault, margin x 1.25 + 10 ms."""
    return SoakRun(duration, records, list(samples), list(faults), 60.0, 10.0, (0.25, 10.0))


def test_rss_growth_compares_minutes_2_to_5_with_the_last_3() -> None:
    def samples(tail_kb: int) -> list[dict[str, Any]]:
        warm = [{"t_s": t, "rss_kb": 1000 if t >= 120 else 500} for t in range(0, 420, 10)]
        return warm + [{"t_s": t, "rss_kb": tail_kb} for t in range(420, 601, 10)]

    assert rss_growth(samples(1040), 600)["growth"] == pytest.approx(0.04)
    assert rss_growth(samples(1060), 600)["growth"] == pytest.approx(0.06)
    assert rss_growth(samples(1060), 400)["growth"] is None  # under 8 minutes
    ok, grown = summarize(run_of([], samples(1040))), summarize(run_of([], samples(1060)))
    assert ok["passed"] and not grown["passed"]
    assert "+6.0%" in next(t["result"] for t in grown["targets"] if "RSS" in t["target"])


def test_latency_windows_and_drift() -> None:
    early = [record(t, latency=10.0 + t % 3) for t in range(0, 290, 5)]
    late = [record(t, latency=12.0 + t % 3) for t in range(310, 598, 5)]
    rows = windows(early + late, 60.0, 600.0)
    assert [r["start_s"] for r in rows] == [i * 60.0 for i in range(10)]
    assert rows[0]["stream"]["finals"] == 12 and rows[0]["stream"]["p50_ms"] == 11.0
    assert "vosk" not in rows[0]
    held = drift(run_of(early + late))["stream"]
    assert held["held"] and held["early_p50_ms"] == 11.0 and held["late_p50_ms"] == 13.0
    slower = [record(t, latency=40.0) for t in range(310, 598, 5)]
    assert drift(run_of(early + slower))["stream"]["held"] is False  # 40 > 12 x 1.25 + 10


def test_failures_near_a_fault_of_its_kind_are_expected_and_others_are_not() -> None:
    kill = FaultEvent("kill", 100.0, 102.0, "SIGKILL", "replaced", True, "200", "decoder_error")
    records = [
        record(99.0, None, "server error decoder_error: gone"),  # touched by the kill
        record(300.0, None, "server error decoder_error: gone"),  # far from it
        record(100.5, None, "closed 1006"),  # near it, but not what a kill does
        record(101.0),
    ]
    summary = summarize(run_of(records, faults=[kill]))
    assert [r.fault for r in records] == ["kill", None, None, None]
    assert summary["failures"]["expected"] == 1 and summary["failures"]["unexpected"] == 2
    assert not summary["passed"]
    (line,) = summary["faults"]
    assert line["touched"] == 1 and line["others_failed"] == 1 and line["held"] is False
    assert "NOT held" in line["line"]


def test_metrics_text_is_read_by_name_and_label() -> None:
    text = 'harken_active_streams 3.0\nharken_errors_total{kind="slow_reader"} 2.0\n'
    assert metric(text, "harken_active_streams") == 3.0
    assert metric(text, "harken_errors_total", 'kind="slow_reader"') == 2.0
    assert metric(text, "harken_errors_total", 'kind="model_error"') == 0.0
    assert metric(None, "harken_active_streams") is None
