"""Test helpers: a real uvicorn on 127.0.0.1 with a random port, test audio, the offline
reference transcript a server must reproduce."""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import soundfile as sf
import soxr
import torch
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from models.bundle import load_bundle
from models.features import featurize
from models.input_adaptation import InputTransforms, fit_transforms
from models.punctuation import (
    CASES,
    MARKS,
    SPECIALS,
    PunctuationConfig,
    Punctuator,
    weight_shapes,
)
from models.warp import adapted_forward
from server.app import create_app
from server.config import ServerConfig
from server.decoding import build_decoder
from server.serve import DrainingServer, make_server
from server.transport import Resources

F32 = npt.NDArray[np.float32]


@dataclass
class Running:
    url: str  # http://127.0.0.1:PORT
    ws: str  # ws://127.0.0.1:PORT
    server: DrainingServer
    thread: threading.Thread  # runs server.run(); ends when the server has exited

    @property
    def resources(self) -> Resources:
        res = self.server.app.state.resources
        assert isinstance(res, Resources)
        return res


@contextmanager
def running(config: ServerConfig) -> Iterator[Running]:
    """Serve `config` on a free port in a background thread until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = make_server(create_app(config), "127.0.0.1", port, log_level="warning")
    started = threading.Event()
    startup = server.startup

    async def startup_then_signal(sockets: list[socket.socket] | None = None) -> None:
        try:
            await startup(sockets)
        finally:
            started.set()

    server.startup = startup_then_signal  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert started.wait(60) and server.started, "the server did not start"
    try:
        yield Running(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", server, thread)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def make_audio(seconds: float = 1.5, rate: int = 16000, seed: int = 0) -> F32:
    """A chirp in bursts over faint noise, float32 in [-1, 1]."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    bursts = np.sin(2 * np.pi * 2 * t) > 0
    audio = 0.2 * np.sin(2 * np.pi * 300 * t * (1 + t)) * bursts + 0.02 * rng.standard_normal(
        len(t)
    )
    return np.asarray(audio, np.float32)


def pcm16(audio: F32) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


def reference_text(
    bundle: Path, audio16k: F32, adapt_input: bool = False, profile: InputTransforms | None = None
) -> str:
    """Whole-utterance forward (with the bundle's speaker adaptation, and with `adapt_input`
    input transforms fitted to it, or heard through a speaker's `profile`), then the bundle's
    decoder: what any chunking must reproduce."""
    model = load_bundle(bundle)
    feats = featurize(audio16k, model.config.features)
    fitted = [fit_transforms(model, feats, model.config.warp_factors)] if adapt_input else None
    x, n = torch.from_numpy(feats)[None], torch.tensor([len(feats)])
    profiles = [profile] if profile is not None else None
    log_probs, n = adapted_forward(model, x, n, fitted, profiles)
    stream = build_decoder(bundle, model.config).start()
    stream.advance(log_probs[0, : int(n[0])].numpy())
    return stream.finalize()[0].text


def random_punctuator(words: Sequence[str] = (), seed: int = 1, lookahead: int = 3) -> Punctuator:
    """A punctuator of small shapes with random weights: its marks and capitals vary, but it
    never writes a word in capitals (normalise_loose would read 'PP' as two letters)."""
    vocab = [*SPECIALS, *words]
    c = PunctuationConfig(len(vocab), 16, dim=8, hidden=8, ffn=8, lookahead=lookahead)
    rng = np.random.default_rng(seed)
    weights = {
        k: rng.standard_normal(shape).astype(np.float32) for k, shape in weight_shapes(c).items()
    }
    weights["out.b"][MARKS.index("")] += 1.0  # fewer marks, more like sentences
    weights["out.b"][len(MARKS) + CASES.index("upper")] -= 100.0
    return Punctuator(c, vocab, weights)


def speak(text: str, voice: str = "en-us") -> F32:
    """`text` read by espeak-ng, as 16 kHz float32."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), text], check=True)
        audio, rate = sf.read(wav, dtype="float32")
    return np.asarray(soxr.resample(audio, rate, 16000), np.float32)


AUDIO_PCM = pcm16(make_audio(1.5))  # the test utterance as a client sends it


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for server-side cleanup that follows a client's action asynchronously."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def vosk_session(url: str, audio: bytes, frame: int = 8000) -> list[Any]:
    """A Vosk client's exchange: config, frames each answered by one reply, then eof and
    its reply; every reply, in order."""
    with connect(f"{url}/vosk") as ws:
        ws.send('{ "config" : { "sample_rate" : 16000 } }')
        replies = []
        for i in range(0, len(audio), frame):
            ws.send(audio[i : i + frame])
            replies.append(json.loads(ws.recv()))
        ws.send('{"eof" : 1}')
        replies.append(json.loads(ws.recv()))
    return replies


def receive_all(ws: ClientConnection, timeout: float | None = None) -> list[Any]:
    """Every JSON message until the server closes, whatever the close code (TimeoutError
    if `timeout` s pass without one)."""
    messages = []
    try:
        while True:
            messages.append(json.loads(ws.recv(timeout=timeout)))
    except ConnectionClosed:
        return messages


def assert_nothing_held(server: Running) -> None:
    """No stream holds a slot, a dispatcher stream or model state any more."""
    res = server.resources
    eventually(lambda: res.slots.in_use == 0 and res.engine.dispatcher.active_streams == 0)
    assert res.engine.dispatcher.runner.streams == 0  # type: ignore[attr-defined]
    assert "harken_active_streams 0.0" in httpx.get(f"{server.url}/metrics").text
