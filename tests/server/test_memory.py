"""The heap trimmer gives freed memory back: without it a busy server's resident size creeps
up although nothing leaks (as a 30-minute soak showed: experiments/loadtest_soak.md). And
start-up's objects are kept out of the collector's walks, whose pauses delayed every stream
of a decoder process (experiments/commit.md)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import httpx
import numpy as np
import pytest

from server.config import ServerConfig
from server.memory import malloc_trim, settle_heap, trim_every
from tests.server.serving import running


def rss_mib() -> float:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


@pytest.mark.skipif(malloc_trim() is None, reason="this C library has no malloc_trim")
def test_freed_heap_memory_goes_back_to_the_system() -> None:
    trim = malloc_trim()
    assert trim is not None
    # 200 MiB in 64 KiB buffers (below glibc's mmap threshold, so from the heap), then one
    # small buffer on top that keeps the heap from shrinking by itself when the rest is freed
    blocks = [np.ones(64 * 1024, np.uint8) for _ in range(3200)]
    pin = np.ones(1024, np.uint8)
    held = rss_mib()
    del blocks
    freed = rss_mib()
    trim()
    trimmed = rss_mib()
    assert held - trimmed > 100, (held, freed, trimmed)
    assert pin.sum() == 1024


@pytest.mark.skipif(malloc_trim() is None, reason="this C library has no malloc_trim")
def test_the_trimmer_runs_until_cancelled() -> None:
    async def main() -> None:
        task = asyncio.create_task(trim_every(0.01))
        await asyncio.sleep(0.1)
        assert not task.done()  # trimming, not failed
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_server_trims_as_configured_and_refuses_a_negative_interval(tiny_bundle: Path) -> None:
    with pytest.raises(ValueError, match="malloc_trim_s must be >= 0"):
        ServerConfig(malloc_trim_s=-1)
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), malloc_trim_s=0.05)
    with running(config) as server:
        assert httpx.get(f"{server.url}/readyz").status_code == 200


def test_settle_heap_takes_what_start_up_built_out_of_the_collectors_reach() -> None:
    built = [[i] for i in range(5000)]  # tracked containers, as a loaded model leaves behind
    before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= before + len(built)
    finally:
        gc.unfreeze()
