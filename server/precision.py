"""`--dtype auto`'s choice and the CPU facts behind it, which now live in `models/precision.py`
(training and the benchmarks need them too, and must not import the server). Re-exported here
so that the server and the callers written against this module keep working."""

from __future__ import annotations

from models.precision import (
    BF16_FLAGS,
    CPUINFO,
    ZEN4_FAMILY,
    bf16_units,
    cpu_description,
    cpu_family,
    cpu_flags,
    cpu_vendor,
    resolve_dtype,
)

__all__ = [
    "BF16_FLAGS",
    "CPUINFO",
    "ZEN4_FAMILY",
    "bf16_units",
    "cpu_description",
    "cpu_family",
    "cpu_flags",
    "cpu_vendor",
    "resolve_dtype",
]
