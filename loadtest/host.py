"""The load generator's host, as every load mode's `run.json` / `soak.json` / `profile.json`
names it (the server's too, when it runs on the same machine).

`cpu_description` writes the CPU exactly as `models/precision.py` does for the benchmarks, so
load tests and model benchmarks on one machine carry the same name; it is a copy, because
loadtest imports nothing of ours but `server/protocol.py` (tests/loadtest/test_host.py keeps
the two equal).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # Linux /proc/cpuinfo names of native bf16 units
CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")


def _first(field: str, cpuinfo: Path) -> str:
    """The first CPU's `field` in /proc/cpuinfo (Linux); "" where it is not readable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == field:
            return value.strip()
    return ""


def cpu_description(cpuinfo: Path = CPUINFO) -> str:
    """Model name, family and model, native bf16 units and the cores this process may use,
    e.g. "AMD EPYC (family 26 model 2; avx512_bf16; 2 cores)"."""
    name = _first("model name", cpuinfo) or platform.processor() or platform.machine()
    family, model = _first("cpu family", cpuinfo), _first("model", cpuinfo)
    units = sorted(set(BF16_FLAGS) & set(_first("flags", cpuinfo).split()))
    details = [f"family {family} model {model}"] if family and model else []
    details += [", ".join(units) or "no bf16 units", f"{len(os.sched_getaffinity(0))} cores"]
    return f"{name} ({'; '.join(details)})"


def machine() -> dict[str, Any]:
    """The load generator's host (the server's too, when it runs on the same one)."""
    memory = None
    try:
        kb = int(MEMINFO.read_text().split()[1])
        memory = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu_description(),
        "cores": os.cpu_count(),
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
    }
