"""The server's `/metrics`, read before and after a load: histogram deltas over the load.

Two histograms are read: `harken_batch_size` (the batch sizes Batch Dispatch made) and
`harken_end_of_utterance_latency_seconds` (the server's own view of latency, eos received to
final sent, which leaves out the network and the load generator's own scheduling delays).
Prometheus histograms are cumulative (`le` buckets), so the steps of exactly size b under a
load are (after - before)[le=b] - (after - before)[le=b-1], and a quantile is interpolated
linearly inside the bucket it falls in, as Prometheus' `histogram_quantile` does.
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

BATCH_SIZE = "harken_batch_size"
EOU_LATENCY = "harken_end_of_utterance_latency_seconds"

# no environment proxies: requests go only to the address the user gave
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_base(ws_url: str) -> str:
    """ws://HOST:PORT/... -> http://HOST:PORT (wss -> https)."""
    parts = urlsplit(ws_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, "", "", ""))


def fetch(url: str, token: str | None = None, timeout: float = 5.0) -> str:
    """GET `url` as text; raises OSError (urllib.error.URLError is one) on failure."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with _OPENER.open(request, timeout=timeout) as response:
        return str(response.read().decode("utf-8"))


def histogram_buckets(metrics_text: str, name: str) -> dict[float, float]:
    """Cumulative counts by bound `le` of histogram `name` (+Inf included as math.inf)."""
    pattern = re.compile(rf'^{re.escape(name)}_bucket\{{le="([^"]+)"\}}\s+(\S+)', re.MULTILINE)
    return {float(le): float(value) for le, value in pattern.findall(metrics_text)}


def batch_buckets(metrics_text: str) -> dict[int, float]:
    """Cumulative step counts by batch-size bound `le` (finite bounds only)."""
    buckets = histogram_buckets(metrics_text, BATCH_SIZE)
    return {int(le): n for le, n in buckets.items() if math.isfinite(le)}


def histogram_quantile(
    before: dict[float, float], after: dict[float, float], q: float
) -> float | None:
    """The q-quantile (0..1) of what was observed between two scrapes, interpolated linearly
    inside its bucket (from 0 for the first); None with no observations or when it falls in
    the +Inf bucket (only "more than the last bound" is known there)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank and cumulative > below:
            if not math.isfinite(bound):
                return None
            return lower + (bound - lower) * (rank - below) / (cumulative - below)
        lower, below = bound, cumulative
    return None


def batch_delta(before: dict[int, float], after: dict[int, float]) -> dict[str, int]:
    """Model steps of each exact batch size between two scrapes, e.g. {"1": 40, "2": 7}."""
    steps: dict[str, int] = {}
    below = 0.0
    for size in sorted(after):
        cumulative = after[size] - before.get(size, 0.0)
        count = int(round(cumulative - below))
        below = cumulative
        if count > 0:
            steps[str(size)] = count
    return steps


def scrape(ws_url: str, token: str | None = None) -> str | None:
    """The server's /metrics text now, or None when it cannot be read."""
    try:
        return fetch(http_base(ws_url) + "/metrics", token)
    except (OSError, ValueError, urllib.error.URLError):
        return None


def scrape_batches(ws_url: str, token: str | None = None) -> dict[int, float] | None:
    """The batch-size histogram now, or None when /metrics cannot be read."""
    text = scrape(ws_url, token)
    return None if text is None else batch_buckets(text)
