"""Prometheus metrics of one app, in its own registry (no process-global state).

`Metrics` is also the dispatcher's observer, so batch sizes, step latency and queue wait
are recorded where they happen.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# fine between 10 and 300 ms, where the latency targets (DS2 §7) and the load ceiling's
# p98 bounds (100 and 200 ms) lie, so a quantile read off the histogram is within a few ms
_LATENCY_BUCKETS = (
    0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1,
    0.12, 0.14, 0.16, 0.18, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.0, 5.0,
)  # fmt: skip


class Metrics:
    def __init__(self, max_batch: int) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        sizes = tuple(float(b) for b in range(1, max_batch + 1))
        self.batch_size = Histogram(
            "harken_batch_size", "streams per model step", buckets=sizes, registry=reg
        )
        self.step_seconds = Histogram(
            "harken_step_seconds", "model step latency", buckets=_LATENCY_BUCKETS, registry=reg
        )
        self.queue_wait_seconds = Histogram(
            "harken_queue_wait_seconds",
            "chunk wait before its step",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.eou_latency_seconds = Histogram(
            "harken_end_of_utterance_latency_seconds",
            "end of stream to final transcript (DS2 §7)",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.real_time_factor = Histogram(
            "harken_real_time_factor",
            "compute time spent on a stream / its audio duration",
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
            registry=reg,
        )
        self.active_streams = Gauge("harken_active_streams", "streams open now", registry=reg)
        self.model_states = Gauge(
            "harken_model_states",
            "streams whose recurrent state the model holds (more than active ones: a leak)",
            registry=reg,
        )
        self.narrowed_searches = Gauge(
            "harken_narrowed_searches",
            "decoder calls so far that searched with --load-beam-threshold (the model lagged)",
            registry=reg,
        )
        self.step_shapes = Gauge(
            "harken_step_shapes",
            "distinct batch shapes the model has stepped (each a compiled kernel and its memory)",
            registry=reg,
        )
        self.errors = Counter("harken_errors", "errors sent to clients", ["kind"], registry=reg)
        self.failed_batches = Counter(
            "harken_failed_batches", "model steps that raised", registry=reg
        )
        self.streams = Counter("harken_streams", "streams finished", ["endpoint"], registry=reg)
        # a fit is due at 15, 30 and 60 s of a stream that adapts to its speaker; when the
        # first fits' waits grow past tens of seconds, the fit thread is not keeping up with
        # new speakers (refits wait for it to be free: server/adaptation.py's ProfileFits)
        self.profile_wait_seconds = Histogram(
            "harken_speaker_profile_wait_seconds",
            "a speaker profile's fit falling due to the stream being heard through it",
            ["fit"],  # "first" (a stream's first profile) or "refit"
            buckets=(0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0),
            registry=reg,
        )

    def track_active(
        self,
        count: Callable[[], int],
        model_states: Callable[[], int],
        step_shapes: Callable[[], int],
        narrowed: Callable[[], int] = lambda: 0,
    ) -> None:
        self.active_streams.set_function(lambda: float(count()))
        self.model_states.set_function(lambda: float(model_states()))
        self.step_shapes.set_function(lambda: float(step_shapes()))
        self.narrowed_searches.set_function(lambda: float(narrowed()))

    # DispatchObserver
    def queued(self, seconds: float) -> None:
        self.queue_wait_seconds.observe(seconds)

    def batch(self, size: int, seconds: float, ok: bool) -> None:
        self.batch_size.observe(size)
        self.step_seconds.observe(seconds)
        if not ok:
            self.failed_batches.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
