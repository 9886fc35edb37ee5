"""`harken serve`: the streaming ASR server. With no arguments it serves models/default on
127.0.0.1:8000; every flag also reads `HARKEN_<NAME>` from the environment."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from server import config as server_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    server_config.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    from models.bundle import BundleError, read_bundle_config
    from server.app import create_app
    from server.engine import one_blas_thread
    from server.serve import make_server
    from server.written import load_punctuator

    try:
        config = server_config.from_args(args)
        read_bundle_config(config.bundle)
        if not config.no_punctuation:  # a broken punctuator named here, not in a traceback
            load_punctuator(Path(config.bundle))
    except (ValueError, BundleError) as e:
        print(f"harken serve: {e}", file=sys.stderr)
        return 2
    one_blas_thread()  # for the life of the server process
    server = make_server(create_app(config), config.host, config.port, config.log_level)
    # uvicorn re-raises Ctrl-C / SIGINT once its (our draining) shutdown is done: that is a
    # clean stop, not a crash to print a traceback for
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else 1
