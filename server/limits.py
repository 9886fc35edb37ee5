"""Admission control: at most `limit` streams at once, and none while draining for shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from server.errors import Overloaded, ShuttingDown


class StreamSlots:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def check(self) -> None:
        """Raise what `hold` would raise now: a response that streams asks before it starts,
        so that a full server still answers with a status code."""
        if self.draining:
            raise ShuttingDown("the server is shutting down; retry on another instance")
        if self.in_use >= self.limit:
            raise Overloaded(f"all {self.limit} stream slots are busy; retry shortly")

    @contextmanager
    def hold(self) -> Iterator[None]:
        """One slot for the duration of a stream or request."""
        self.check()
        self.in_use += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.in_use -= 1
            if self.in_use == 0:
                self._idle.set()

    async def drain(self, timeout: float) -> bool:
        """Refuse new streams, then wait up to `timeout` s for the open ones; True if all ended."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True
