"""`--dtype auto`: the precision the model runs in, chosen from what the hardware does fast.

DS2 (§7.2) serves in half precision because its GPUs run half-precision matrices several
times faster. CPUs differ: those with native bf16 matrix units (AMX, or AVX512-BF16) run our
streaming steps 1.4-2.3x faster in bf16 than in fp32 at the batch sizes Batch Dispatch makes
(1-16 streams, `models/results/dtype/`), at the same accuracy; on AVX2-only CPUs bf16 has no
kernels and is several times slower (`models/results/results.md`). So: fp16 on CUDA, bf16
where the CPU flags show those units, fp32 elsewhere.
"""

from __future__ import annotations

from pathlib import Path

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # Linux /proc/cpuinfo names of native bf16 units
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first CPU's feature flags (Linux); empty where /proc/cpuinfo is not readable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def resolve_dtype(
    requested: str, device: str, flags: frozenset[str] | None = None
) -> tuple[str, str]:
    """The dtype to load the model in, and why (for the start-up log)."""
    if requested != "auto":
        return requested, "as configured"
    if device == "cuda":
        return "fp16", "auto: fp16 on CUDA (DS2 §7.2)"
    units = sorted(set(BF16_FLAGS) & (cpu_flags() if flags is None else flags))
    if units:
        return "bf16", f"auto: bf16, this CPU has native bf16 units ({', '.join(units)})"
    return "fp32", "auto: fp32, this CPU has no native bf16 units (bf16 would be slower)"
