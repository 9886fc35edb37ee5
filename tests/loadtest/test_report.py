"""The pieces of a report without a server: WER, /metrics deltas, summaries and plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.client import ClientConfig, UtteranceResult
from loadtest.report import RESULT_KEYS, Level, summarize, sustained, write_comparison, write_report
from loadtest.scrape import (
    batch_buckets,
    batch_delta,
    histogram_buckets,
    histogram_quantile,
    http_base,
)
from loadtest.wer import edit_distance, wer, words

METRICS = """# TYPE harken_batch_size histogram
harken_batch_size_bucket{le="1.0"} %d
harken_batch_size_bucket{le="2.0"} %d
harken_batch_size_bucket{le="3.0"} %d
harken_batch_size_bucket{le="+Inf"} %d
harken_batch_size_count %d
"""


def test_edit_distance_and_wer() -> None:
    assert edit_distance(["a", "b", "c"], ["a", "c"]) == 1
    assert edit_distance(["a", "b"], ["x", "a", "b", "y"]) == 2
    assert edit_distance([], ["a"]) == 1
    assert words("It's, HERE!") == ["it's", "here"]
    assert wer([("the cat sat", "the cat sat"), ("a b", "a c")]) == pytest.approx(1 / 5)
    assert wer([]) is None


def test_batch_histogram_delta_counts_steps_of_each_size() -> None:
    before = batch_buckets(METRICS % (5, 6, 6, 6, 6))
    after = batch_buckets(METRICS % (15, 18, 20, 20, 20))
    assert before == {1: 5.0, 2: 6.0, 3: 6.0}
    assert batch_delta(before, after) == {"1": 10, "2": 2, "3": 2}
    assert http_base("wss://host:9/v1/stream?x=1") == "https://host:9"


LATENCY = """harken_end_of_utterance_latency_seconds_bucket{le="0.01"} %d
harken_end_of_utterance_latency_seconds_bucket{le="0.02"} %d
harken_end_of_utterance_latency_seconds_bucket{le="0.05"} %d
harken_end_of_utterance_latency_seconds_bucket{le="+Inf"} %d
"""


def test_latency_quantiles_come_from_the_histogram_delta() -> None:
    name = "harken_end_of_utterance_latency_seconds"
    before = histogram_buckets(LATENCY % (7, 7, 7, 7), name)
    # since then: 10 observations in (0, 10 ms], 10 in (10, 20], none slower
    after = histogram_buckets(LATENCY % (17, 27, 27, 27), name)
    assert histogram_quantile(before, after, 0.5) == pytest.approx(0.010)
    assert histogram_quantile(before, after, 0.25) == pytest.approx(0.005)
    assert histogram_quantile(before, after, 0.98) == pytest.approx(0.0196)
    assert histogram_quantile(after, after, 0.5) is None  # nothing observed in between
    # a quantile past the last finite bound is only known to be above it
    slow = histogram_buckets(LATENCY % (17, 27, 27, 40), name)
    assert histogram_quantile(before, slow, 0.98) is None
    assert histogram_buckets(METRICS % (1, 2, 3, 4, 4), name) == {}  # another histogram


def test_client_config_finds_the_stream_path() -> None:
    assert ClientConfig("ws://h:1").stream_url == "ws://h:1/v1/stream"
    assert ClientConfig("ws://h:1/other").stream_url == "ws://h:1/other"


def ok(ms: float, hyp: str = "a b") -> UtteranceResult:
    return UtteranceResult("a b", 1.0, hyp, ms, 50.0, [100.0])


def test_summary_is_exactly_the_documented_shape(tmp_path: Path) -> None:
    failed = UtteranceResult("a b", 1.0, failure="closed 1013")
    levels = [
        Level(1, [ok(10), ok(30, "a")], {"1": 40}, 2.0),
        Level(2, [failed], None, 2.0, ["/metrics could not be read; no batch sizes"]),
    ]
    results = write_report(tmp_path, levels, {"command": "test"})
    assert json.loads((tmp_path / "results.json").read_text()) == {"results": results}
    first, second = results
    assert tuple(first) == RESULT_KEYS
    assert first["utterances"] == 2 and first["p50_ms"] == 20.0 and first["max_ms"] == 30.0
    assert first["wer"] == 0.25 and first["failures"] == 0
    assert second == summarize(levels[1])
    assert second["utterances"] == 0 and second["p98_ms"] is None and second["failures"] == 1
    report = (tmp_path / "report.md").read_text()
    assert "1 x closed 1013" in report and "/metrics could not be read" in report


def test_without_the_plot_extra_reports_are_written_without_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib is the `plot` extra: a load generator installed without it still reports."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    write_report(tmp_path, [Level(1, [ok(10)], {"1": 4}, 2.0)], {"command": "test"})
    write_comparison(tmp_path, {"a": [summarize(Level(1, [ok(10)], {}, 2.0))]}, 200, {})
    assert not list(tmp_path.glob("*.png"))
    for name in ("report.md", "compare.md"):
        text = (tmp_path / name).read_text()
        assert "matplotlib is not installed" in text and "![" not in text


def test_sustained_streams_and_ratios(tmp_path: Path) -> None:
    def level(streams: int, p98: float | None, failures: int = 0) -> dict[str, Any]:
        r: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
        r.update(streams=streams, utterances=9, p50_ms=p98, p98_ms=p98, failures=failures)
        return r | {"batch_sizes": {}}

    eager = [level(1, 20), level(5, 80), level(10, 150), level(20, 400)]
    none = [level(1, 30), level(5, 250), level(10, None, failures=3)]
    assert sustained(eager, 200) == 10 and sustained(none, 200) == 1
    runs = {"eager": eager, "none": none}
    comparison = write_comparison(tmp_path, runs, 200, {"command": "test"})
    assert comparison["ratios"] == {"eager/none": 10.0, "none/eager": 0.1}
    # several bounds: each has its own counts, and the top level is the largest's
    comparison = write_comparison(tmp_path, runs, [100, 200], {"command": "test"})
    assert comparison["by_bound"]["100"]["sustained_streams"] == {"eager": 5, "none": 1}
    assert comparison["by_bound"]["100"]["ratios"]["eager/none"] == 5.0
    assert comparison["sustained_streams"] == {"eager": 10, "none": 1}
    report = (tmp_path / "compare.md").read_text()
    assert "| eager | 5 | 10 |" in report and "| eager/none | 5 | 10 |" in report
