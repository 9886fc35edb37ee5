"""`harken loadtest --profile`: where a running server's CPU goes, stage by stage, under N
real-time streams (issue 19: the ceiling of concurrent streams on a small CPU).

    harken loadtest --profile --manifest M.jsonl --streams 20 --seconds 30 \
        --serve-args="--max-streams 64" --out experiments/loadtest/profile
    harken loadtest --profile --url ws://127.0.0.1:8000 --server-pid PID --manifest M.jsonl \
        --streams 20 --seconds 30 --out DIR

One load level of the sweep (loadtest/sweep.py's `run_level`: N clients streaming manifest
utterances at real time for `--seconds`) runs while py-spy samples the server and its
decoder processes (`py-spy record --pid PID --subprocesses --threads --nonblocking --rate R
--format raw`). Every sampled stack is put in a stage by loadtest/stages.py; the report gives
per stage the samples, the CPU milliseconds per second of one stream's audio
(samples / R * 1000 / audio seconds streamed, which is N x `--seconds` when every client
streams the whole time) and the share of all non-idle samples, beside the CPU time the
kernel counted for the server's processes over the same window (/proc, loadtest/procstats.py)
and the batch sizes /metrics saw.

loadtest talks to a server over the network only; this is the one exception: a sampling
profiler attaches to the server's process by pid (ptrace), so the server must run on this
machine, as the same user (or this must run as root), where ptrace is allowed. Without
`--url` it starts its own server with `--serve-args` (loadtest/launch.py) and profiles that.
py-spy is in the `bench` extra; `--server-pid` is the flag `--soak` uses too.

Writes to `--out`: profile.json, profile.md, stacks.txt (py-spy's raw collapsed stacks, for a
flame graph), py-spy.log, and server.log for a server it started. Exit status: 0, 1 when
some utterance failed (the profile is still written), 2 for bad arguments, a server that
would not start, or py-spy that could not attach.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadtest.client import ClientConfig, Utterance
from loadtest.host import machine
from loadtest.launch import LaunchError, launched_server
from loadtest.manifest import load_manifest
from loadtest.procstats import PROC, read_tree
from loadtest.profile_report import Window, summarize, write_profile
from loadtest.stages import parse
from loadtest.sweep import LoadConfig, run_level

ATTACH_TIMEOUT_S = 20.0  # py-spy reads the interpreter's memory layout before its first sample
STOP_TIMEOUT_S = 30.0  # after SIGINT, py-spy writes its file and exits


class ProfileError(RuntimeError):
    """The profiler could not run; the message says why and what to change."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("profile (--profile): the server's CPU per stage")
    group.add_argument("--profile", action="store_true", help="profile one load level")
    group.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    group.add_argument("--py-spy", default="", help="py-spy to run; empty: beside python, or PATH")


def main(args: argparse.Namespace) -> int:
    try:
        load, client = configure(args)
        spy = args.py_spy or find_py_spy()
        if not spy:
            raise ValueError("py-spy is not installed: pip install 'harken[bench]' (or py-spy)")
        utterances = load_manifest(Path(args.manifest), args.limit, args.max_utterance_s)
    except ValueError as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with _target(args, out) as (url, pid):
            window = measure(spy, pid, replace(client, url=url), load, utterances, args.rate, out)
    except (LaunchError, ProfileError) as e:
        print(f"harken loadtest: {e}", file=sys.stderr)
        return 2
    meta = _meta(args, url, pid, len(utterances)) | {"machine": machine()}
    summary = summarize(window, meta)
    write_profile(out, summary)
    print(f"profile: {out / 'profile.md'}", file=sys.stderr)
    return 1 if summary["load"]["failures"] else 0


def configure(args: argparse.Namespace) -> tuple[LoadConfig, ClientConfig]:
    """The one load level and client settings; ValueError says what to change."""
    if args.compare_policies:
        raise ValueError("--profile and --compare-policies are separate runs; give one")
    if len(args.url) > 1:
        raise ValueError("--profile measures one server: give --url once")
    pid = getattr(args, "server_pid", None)
    if args.url and pid is None:
        raise ValueError("--profile with --url needs --server-pid (py-spy attaches by pid)")
    if pid is not None and not args.url:
        raise ValueError("--server-pid goes with --url (a server started here is known)")
    if args.url and args.serve_args:
        raise ValueError("--serve-args is for a server --profile starts; drop it or --url")
    if pid is not None and not (PROC / str(pid)).is_dir():
        raise ValueError(f"--server-pid {pid}: no such process on this machine")
    if not 1 <= args.rate <= 1000:
        raise ValueError(f"--rate must be 1..1000 samples per second, got {args.rate}")
    try:
        streams = int(args.streams)
    except ValueError:
        raise ValueError(f"--profile takes one --streams value, got {args.streams!r}") from None
    if streams < 1 or args.seconds <= 0 or args.offset_s < 0:
        raise ValueError("--streams must be >= 1, --seconds > 0 and --offset-s >= 0")
    client = ClientConfig.from_args(args)
    load = LoadConfig((streams,), args.seconds, args.offset_s, 0.0, args.progress_s, args.seed)
    return load, client


def find_py_spy() -> str | None:
    """py-spy beside this interpreter (a virtual environment's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


@contextmanager
def _target(args: argparse.Namespace, out: Path) -> Iterator[tuple[str, int]]:
    """(ws:// URL, server pid): the given server, or one started for the block."""
    if args.url:
        yield args.url[0], args.server_pid  # checked by `configure`
        return
    with launched_server("eager", shlex.split(args.serve_args), out / "server.log") as server:
        yield server.url, server.pid


def measure(
    spy: str,
    pid: int,
    client: ClientConfig,
    load: LoadConfig,
    utterances: list[Utterance],
    rate: int,
    out: Path,
) -> Window:
    """The load level under py-spy, with the CPU time the kernel counted around it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = Sampler(spy, pid, rate, out / "stacks.txt", out / "py-spy.log")
    try:
        server_cpu = read_tree(pid).total("cpu_s")
        loadgen_cpu = time.process_time()
        level = asyncio.run(run_level(load, client, utterances, load.streams[0]))
        loadgen_cpu = time.process_time() - loadgen_cpu
        server_cpu = read_tree(pid).total("cpu_s") - server_cpu
    except ProcessLookupError:
        raise ProfileError(f"the server (pid {pid}) exited during the profile") from None
    finally:
        samples, errors = sampler.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    profiler_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if not (out / "stacks.txt").is_file():
        raise ProfileError(f"py-spy wrote no stacks; see {out / 'py-spy.log'}")
    return Window(
        level=level,
        stacks=parse((out / "stacks.txt").read_text()),
        rate=rate,
        server_cpu_s=server_cpu,
        loadgen_cpu_s=loadgen_cpu,
        profiler_cpu_s=profiler_cpu,
        py_spy_samples=samples,
        py_spy_errors=errors,
    )


class Sampler:
    """`py-spy record` on a pid, from construction (once it samples) until `stop`."""

    def __init__(self, spy: str, pid: int, rate: int, output: Path, log: Path) -> None:
        command = [spy, "record", "--pid", str(pid), "--subprocesses", "--threads"]
        command += ["--nonblocking", "--rate", str(rate), "--format", "raw", "-o", str(output)]
        self.log, self.lines = log, [shlex.join(command)]
        self._sampling = threading.Event()
        try:
            self._process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        except OSError as e:
            raise ProfileError(f"cannot run py-spy ({spy}): {e}") from None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_sampling(pid)

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:  # py-spy says everything on stdout
            self.lines.append(line.rstrip())
            if "Sampling process" in line:
                self._sampling.set()

    def _wait_sampling(self, pid: int) -> None:
        """Until py-spy says it samples; py-spy that exits first could not attach."""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while not self._sampling.wait(0.1):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                said = self._said()
                hint = (
                    ". It needs ptrace rights over the server: the same user where "
                    "kernel.yama.ptrace_scope is 0, root, or CAP_SYS_PTRACE in a container"
                    if re.search(r"(?i)permission|not permitted|ptrace", said)
                    else ""
                )
                raise ProfileError(f"py-spy could not attach to pid {pid}: {said}{hint}")

    def stop(self) -> tuple[int | None, int | None]:
        """SIGINT (py-spy then writes its output), wait; (samples, errors) as it reports."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reader.join(5.0)
        self.log.write_text("\n".join(self.lines) + "\n")
        found = re.search(r"Samples: (\d+) Errors: (\d+)", "\n".join(self.lines))
        return (int(found[1]), int(found[2])) if found else (None, None)

    def _said(self) -> str:
        """py-spy's error line (not the backtrace after it), or its last words."""
        said = [line.removeprefix("py-spy> ").strip() for line in self.lines[1:] if line.strip()]
        errors = [line for line in said if line.startswith("Error")]
        return " ".join(errors[:1] or said[-2:]) or f"exit status {self._process.returncode}"


def _meta(args: argparse.Namespace, url: str, pid: int, n_utterances: int) -> dict[str, Any]:
    argv = ["harken", "loadtest", *sys.argv[2:]] if sys.argv[1:2] == ["loadtest"] else None
    return {
        "command": shlex.join(argv) if argv else "harken loadtest --profile (called in-process)",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "url": url,
        "server_pid": pid,
        "server_started_here": not args.url,
        "serve_args": args.serve_args,
        "manifest": args.manifest,
        "manifest_utterances": n_utterances,
        "chunk_ms": args.chunk_ms,
        "partials": not args.no_partials,
        "cores": os.cpu_count() or 1,
    }
