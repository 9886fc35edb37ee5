"""The server's memory: freed memory given back to the system, and collections kept short.

Under load the model step, features and sockets allocate and free many buffers of varying
sizes from several threads. glibc's malloc keeps what is freed for reuse instead of returning
it, so a busy server's resident size creeps up for hours without any leak: in a 30-minute
soak the main process grew 12%, and `malloc_trim(0)` after a load put it back where it was
before (experiments/loadtest/ceiling/README.md). The trimmer asks for that every few seconds.
And the garbage collector's pauses: `settle_heap` takes what start-up built out of its reach.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Callable

log = logging.getLogger("harken.server")


def malloc_trim() -> Callable[[], int] | None:
    """glibc's `malloc_trim(0)`, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: int(trim(0))


async def trim_every(interval_s: float) -> None:
    """Trim the heap every `interval_s` seconds until cancelled (off the event loop: a trim
    walks the heap, and ctypes lets go of the interpreter lock meanwhile)."""
    trim = malloc_trim()
    if trim is None:
        log.info("no malloc_trim in this C library; freed memory stays with the allocator")
        return
    while True:
        await asyncio.sleep(interval_s)
        await asyncio.to_thread(trim)


def settle_heap() -> None:
    """Move every object alive now (torch, numba, the LM: about 200,000 of them) out of the
    garbage collector's reach. A full collection walks every tracked object, and with them
    in the heap it stopped a decoder process for a noticeable pause now and then, each time
    delaying every stream it serves (experiments/commit.md); after this it walks only what
    the streams allocated. Call once, when start-up is done."""
    gc.collect()
    gc.freeze()
