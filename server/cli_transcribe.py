"""`harken transcribe FILE...`: one JSON line per file, with at least `file` and `text`.

Without `--server` it loads the bundle and runs the server's own engine in-process, a file
decoded and heard a block at a time (server/recording.py), so an hour-long one is never held
whole; with `--server URL` it streams each file to a running server's
`/v1/stream` over WebSocket (where the server's `--max-stream-s` applies). A file that fails
prints `{"file", "error"}` and the exit status becomes 1. Text is written, with
punctuation and capitals, where the bundle has a punctuator (server/written.py);
`--no-punctuate` prints the recognised words as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from contextlib import aclosing, closing
from pathlib import Path
from typing import Any

from models.config import parse_bool
from server.config import DECODERS, DEFAULT_BUNDLE, DEVICES, DTYPES, ENV_PREFIX, ServerConfig

SAMPLE_RATE = 16000
FRAME_SECONDS = 0.1  # audio per WebSocket frame when sending to a server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="audio files (WAV, FLAC, OGG; more with ffmpeg)"
    )
    parser.add_argument(
        "--server", default=None, help="URL of a running harken server, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument("--bundle", default=DEFAULT_BUNDLE, help="model bundle for in-process runs")
    parser.add_argument("--device", choices=DEVICES, default="cpu")
    parser.add_argument("--dtype", choices=DTYPES, default="auto")
    parser.add_argument("--decoder", choices=DECODERS, default="beam")
    parser.add_argument(
        "--ensemble",
        type=parse_bool,
        default=True,
        help="every network of an ensemble bundle (false: its own network only)",
    )
    parser.add_argument("--words", action="store_true", help="include words with start/end/conf")
    parser.add_argument(
        "--no-punctuate",
        action="store_true",
        help="the recognised words as they are, without the punctuation and capitals that "
        "the bundle's punctuator (punctuation.json) writes by default",
    )
    parser.add_argument(
        "--adapt-input",
        type=parse_bool,
        default=False,
        help="hear each file through input transforms fitted to it first (about a point of "
        "WER on unheard voices for about 0.3 of its length in compute; "
        "models/input_adaptation.py); in-process runs only",
    )
    parser.add_argument("--adapt-steps", type=int, default=5, help="the fit's gradient steps")
    parser.add_argument("--adapt-rate", type=float, default=0.05, help="the fit's step rate")
    parser.add_argument(
        "--max-file-s",
        type=float,
        default=None,
        help="longest file, in seconds, for in-process runs (default "
        f"{ServerConfig.max_file_s:g}, or ${ENV_PREFIX}MAX_FILE_S, as for harken serve)",
    )


def main(args: argparse.Namespace) -> int:
    if args.server and args.adapt_input:
        print(
            "harken transcribe: --adapt-input needs each file whole before it is heard, and "
            "--server streams it; drop --server, or POST the file to the server's "
            "/v1/audio/transcriptions with adapt_input=true",
            file=sys.stderr,
        )
        return 2
    if args.server:
        written = not args.no_punctuate
        results = [_remote(args.server, Path(f), args.words, written) for f in args.files]
    else:
        from server.engine import one_blas_thread

        with one_blas_thread():  # restored after: transcribe may run inside another program
            results = asyncio.run(_local(args))
    for result in results:
        print(json.dumps(result), flush=True)
    return 1 if any("error" in r for r in results) else 0


def _max_file_s(flag: float | None, env: Mapping[str, str]) -> float:
    """The file length limit: the flag, else `HARKEN_MAX_FILE_S`, else the server's default."""
    raw = flag if flag is not None else env.get(f"{ENV_PREFIX}MAX_FILE_S")
    if raw is None:
        return ServerConfig.max_file_s
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"max_file_s must be a float, got {raw!r}") from None


async def _local(args: argparse.Namespace) -> list[dict[str, Any]]:
    from models.bundle import BundleError
    from server.engine import running_engine

    try:
        config = ServerConfig(
            bundle=args.bundle,
            device=args.device,
            dtype=args.dtype,
            decoder=args.decoder,
            ensemble=args.ensemble,
            adapt_steps=args.adapt_steps,
            adapt_rate=args.adapt_rate,
            # one file at a time: the step shapes of one stream, and one decoder in this
            # process (starting decoder processes took longer than decoding a short file)
            warmup="first",
            decoder_processes=False,
            decoder_workers=1,
            max_file_s=_max_file_s(args.max_file_s, os.environ),
            no_punctuation=args.no_punctuate,
        )
        adapt, written = args.adapt_input, not args.no_punctuate
        async with running_engine(config) as engine:
            return [
                await _local_file(engine, Path(f), args.words, adapt, written) for f in args.files
            ]
    except (BundleError, ValueError, OSError) as e:
        return [{"file": f, "error": f"cannot load the model: {e}"} for f in args.files]


async def _local_file(
    engine: Any, path: Path, words: bool, adapt: bool, written: bool
) -> dict[str, Any]:
    from server.errors import SessionError
    from server.recording import file_blocks, transcribe

    try:
        async with aclosing(file_blocks(path, engine)) as blocks:
            _, final = await transcribe(engine, blocks, adapt, written=written)
    except (OSError, ValueError, SessionError) as e:
        return {"file": str(path), "error": str(e)}
    return _line(path, final.model_dump(), words)


def _remote(server: str, path: Path, words: bool, written: bool) -> dict[str, Any]:
    from websockets.exceptions import ConnectionClosed, InvalidURI, WebSocketException
    from websockets.sync.client import connect

    from server.audio import decode_blocks

    url = (
        server.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        + "/v1/stream"
    )
    try:
        with closing(decode_blocks(path, SAMPLE_RATE)) as blocks, connect(url, max_size=None) as ws:
            ws.send(
                json.dumps(
                    {
                        "type": "config",
                        "sample_rate": SAMPLE_RATE,
                        "encoding": "f32le",
                        "partials": False,
                        "punctuate": written,
                    }
                )
            )
            step = int(SAMPLE_RATE * FRAME_SECONDS)
            for block in blocks:
                for i in range(0, len(block), step):
                    ws.send(block[i : i + step].astype("<f4").tobytes())
            ws.send(json.dumps({"type": "eos"}))
            reply = json.loads(ws.recv())
    except (OSError, ValueError, ConnectionClosed, InvalidURI, WebSocketException) as e:
        return {"file": str(path), "error": str(e)}
    if reply.get("type") == "error":
        return {"file": str(path), "error": f"{reply['code']}: {reply['message']}"}
    return _line(path, reply, words)


def _line(path: Path, final: dict[str, Any], words: bool) -> dict[str, Any]:
    line = {"file": str(path), "text": final["text"], "duration": round(final["duration"], 3)}
    return {**line, "words": final["words"]} if words else line


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="harken transcribe")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
