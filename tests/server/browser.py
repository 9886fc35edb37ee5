"""Headless Chromium driven over the DevTools protocol, with a WAV file as its microphone.

Only what the page test needs: start Chromium on a URL, evaluate JavaScript in the page,
quit. Debian's `chromium` is installed by `scripts/setup.sh --test`."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

FLAGS = [
    "--headless=new",
    "--no-sandbox",  # the tests run as root in CI
    "--disable-gpu",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
    "--disable-background-networking",  # the closed network refuses Chromium's own calls
    "--disable-component-update",
    "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
    "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-port=0",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws, self.ids = ws, itertools.count(1)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        msg_id = next(self.ids)
        params = {"expression": expression, "returnByValue": True}
        self.ws.send(json.dumps({"id": msg_id, "method": "Runtime.evaluate", "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == msg_id:
                return reply["result"]["result"].get("value")

    def wait_for(self, expression: str, timeout: float) -> Any:
        """Poll until the expression is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while not (value := self.evaluate(expression)):
            assert time.monotonic() < deadline, f"the page never satisfied {expression!r}"
            time.sleep(0.2)
        return value


@contextlib.contextmanager
def open_page(url: str, microphone: Path) -> Iterator[Page]:
    """Chromium on `url`, hearing `microphone` (a WAV file, played once) as its microphone."""
    exe = chromium()
    assert exe, "Debian's chromium is needed: run `bash scripts/setup.sh --test`"
    # chromium helper processes can outlive the browser and still write to the profile
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        args = [exe, *FLAGS, f"--user-data-dir={profile}"]
        args.append(f"--use-file-for-fake-audio-capture={microphone}%noloop")
        proc = subprocess.Popen([*args, url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(Path(profile), proc)
            with connect(_page_socket(port), max_size=None) as ws:
                yield Page(ws)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes]) -> int:
    """Chromium writes the port it chose to DevToolsActivePort in its profile."""
    deadline = time.monotonic() + 30
    marker = profile / "DevToolsActivePort"
    while not marker.exists() or not marker.read_text().strip():
        assert proc.poll() is None, f"chromium exited with {proc.returncode}"
        assert time.monotonic() < deadline, "chromium did not open its DevTools port"
        time.sleep(0.1)
    return int(marker.read_text().split()[0])


def _page_socket(port: int) -> str:
    deadline = time.monotonic() + 30
    while True:
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            return str(pages[0]["webSocketDebuggerUrl"])
        assert time.monotonic() < deadline, "chromium opened no page"
        time.sleep(0.1)
