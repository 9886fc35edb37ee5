"""Pausing a training run without charging the pause to it.

A run on a shared machine sometimes has to give the cores back for a while (a latency benchmark
wants a quiet machine). `kill -TSTP <pid>` stops the trainer and `kill -CONT <pid>` resumes it;
the time in between is kept out of the run's training time, so the pause neither eats the time
budget nor bends the learning-rate schedule that is a function of it."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import Any


class PauseClock:
    """Counts the seconds this process spent stopped by SIGTSTP; `take` hands them over once."""

    def __init__(self) -> None:
        self._paused_s = 0.0
        self._previous: Any = None

    def install(self) -> None:
        """Handle SIGTSTP (main thread only: Python delivers signals there)."""
        if hasattr(signal, "SIGTSTP") and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTSTP, self._stop)

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTSTP, self._previous)
            self._previous = None

    def take(self) -> float:
        """The paused seconds since the last call."""
        paused, self._paused_s = self._paused_s, 0.0
        return paused

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        start = time.perf_counter()
        os.kill(os.getpid(), signal.SIGSTOP)  # returns once someone sends SIGCONT
        self._paused_s += time.perf_counter() - start
