"""What a soak records: one `Record` per stream or file upload, one `FaultEvent` per fault
injected. Times are seconds since the soak began; latencies in ms."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from loadtest.client import UtteranceResult

# /v1/stream, /vosk, POST /v1/audio/transcriptions, /v1/realtime (OpenAI's Realtime API)
PROTOCOLS = ("stream", "vosk", "rest", "realtime")
# what made a record: the steady load, or one of the faults' own clients
TAGS = ("load", "vanish", "stall", "burst", "probe")


@dataclass
class Record:
    client: int  # the load client that made it; -1 for a fault's own connections
    protocol: str  # one of PROTOCOLS
    tag: str  # one of TAGS
    utterance: str  # the manifest's audio path
    reference: str  # the manifest's transcript
    start_s: float  # connect (REST: the start of the "recording")
    end_s: float  # when the stream or request was over
    latency_ms: float | None  # end of audio -> final (REST: request -> response)
    text: str  # the final's text ("" without one)
    failure: str | None  # why no final came; None when it did
    fault: str | None = None  # the fault whose expected effect this failure is

    @property
    def ok(self) -> bool:
        return self.failure is None and self.latency_ms is not None

    @classmethod
    def of(
        cls, result: UtteranceResult, t0: float, client: int, protocol: str, tag: str, name: str
    ) -> Record:
        """From a client's result, whose times are perf_counter seconds; t0 is the soak's start."""
        ended = result.ended or result.started
        return cls(
            client,
            protocol,
            tag,
            name,
            result.reference,
            round(result.started - t0, 3),
            round(ended - t0, 3),
            None if result.eou_latency_ms is None else round(result.eou_latency_ms, 2),
            result.hypothesis,
            result.failure,
        )


@dataclass
class FaultEvent:
    """One fault: what was done, to whom, and what its own check found."""

    name: str  # kill | vanish | stall | burst | term
    start_s: float
    end_s: float  # when its effect was over (the worker replaced, the clients dropped, ...)
    action: str  # what was done, in words
    outcome: str  # what the streams it touched got, in words
    held: bool  # its own check: replaced, freed, dropped, refused with a reason, drained
    readyz: str  # /readyz once it was over, e.g. "200"
    # load streams in the fault's window that fail with a reason matching this are its
    # expected casualties (a regex; None: no load stream is expected to fail)
    expected: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False  # could not be injected here (see action)

    def explains(self, record: Record, window_s: float) -> bool:
        """`record` failed in this fault's window, in the way this fault fails streams."""
        if self.skipped or self.expected is None or record.failure is None:
            return False
        inside = record.end_s >= self.start_s - window_s and record.start_s <= self.end_s + window_s
        return inside and re.search(self.expected, record.failure) is not None
