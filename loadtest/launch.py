"""Start `harken serve` in a child process on a free local port, for `--compare-policies`
and `--soak` (which also needs the process: its pid for /proc, and to signal it).

The server is a separate process reached over the network like any other; its output goes
to a log file. Readiness is `GET /readyz` answering 200 (the bundle is loaded and the
dispatcher runs); stopping is SIGINT (uvicorn's graceful shutdown), then SIGKILL. Servers
started here warm every step shape before they answer ready (`--warmup all`, unless the
serve arguments say otherwise), so that a measurement's first seconds do not share the model
thread with start-up's background warm-up.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.scrape import fetch


class LaunchError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(policy: str, port: int, serve_args: Sequence[str]) -> list[str]:
    """`harken serve --policy P --port N --warmup all ...` with this interpreter (a later
    `--warmup` in `serve_args` wins)."""
    cli = "import sys, harken_cli; sys.exit(harken_cli.main(sys.argv[1:]))"
    flags = ["--host", "127.0.0.1", "--port", str(port), "--policy", policy, "--warmup", "all"]
    return [sys.executable, "-c", cli, "serve", *flags, *serve_args]


@dataclass(frozen=True)
class Launched:
    """A started server: where to reach it, and its process."""

    url: str  # ws://127.0.0.1:PORT
    process: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.process.pid


@contextmanager
def launched(
    policy: str, serve_args: Sequence[str], log: Path, ready_timeout_s: float = 180.0
) -> Iterator[str]:
    """A server with `policy` for the duration of the block; yields its ws:// URL."""
    with launched_server(policy, serve_args, log, ready_timeout_s) as server:
        yield server.url


@contextmanager
def launched_server(
    policy: str, serve_args: Sequence[str], log: Path, ready_timeout_s: float = 180.0
) -> Iterator[Launched]:
    """`launched`, yielding the process too. The block may stop the server itself (a
    SIGTERM, say); it is only signalled at the end if it still runs."""
    port = free_port()
    command = serve_command(policy, port, serve_args)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        out.write(" ".join(command) + "\n")
        out.flush()
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd(), text=True
        )
        try:
            _wait_ready(process, f"http://127.0.0.1:{port}/readyz", log, ready_timeout_s)
            yield Launched(f"ws://127.0.0.1:{port}", process)
        finally:
            _stop(process)


def _wait_ready(process: subprocess.Popen[str], url: str, log: Path, timeout: float) -> None:
    """Until /readyz answers, the process exits, or the timeout passes (a child process
    offers no event to wait on, so this asks every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
            raise LaunchError(f"harken serve exited with {process.returncode}:\n{tail}")
        try:
            fetch(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.2)
    raise LaunchError(f"harken serve was not ready within {timeout:.0f} s; see {log}")


def _stop(process: subprocess.Popen[str], grace_s: float = 20.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
