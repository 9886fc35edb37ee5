"""The server's `/metrics`, read before and after a load: the batch-size histogram's delta.

Only `harken_batch_size` is read; Prometheus histograms are cumulative (`le` buckets), so
the steps of exactly size b under a load are (after - before)[le=b] - (after - before)[le=b-1].
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

_BUCKET = re.compile(r'^harken_batch_size_bucket\{le="([^"]+)"\}\s+(\S+)', re.MULTILINE)

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


def batch_buckets(metrics_text: str) -> dict[int, float]:
    """Cumulative step counts by batch-size bound `le` (finite bounds only)."""
    buckets = {}
    for le, value in _BUCKET.findall(metrics_text):
        if le != "+Inf":
            buckets[int(float(le))] = float(value)
    return buckets


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


def scrape_batches(ws_url: str, token: str | None = None) -> dict[int, float] | None:
    """The batch-size histogram now, or None when /metrics cannot be read."""
    try:
        return batch_buckets(fetch(http_base(ws_url) + "/metrics", token))
    except (OSError, ValueError, urllib.error.URLError):
        return None
