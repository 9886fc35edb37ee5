"""`--dtype auto`: the precision the model runs in, chosen from what the hardware does fast.

DS2 (§7.2) serves in half precision because its GPUs run half-precision matrices several
times faster. CPUs differ: those with native bf16 matrix units (AMX, or AVX512-BF16) run our
streaming steps 1.4-2.3x faster in bf16 than in fp32 at the batch sizes Batch Dispatch makes
(1-16 streams, `experiments/dtype.md`), at the same accuracy; on AVX2-only CPUs bf16 has no
kernels and is several times slower (`experiments/dtype.md`). One exception was
measured: an Intel Xeon (family 6 model 207) whose AMX the hypervisor hides, showing
AVX512-BF16 only, served 48 streams with about 30% higher latency in bf16 than in fp32
(`experiments/loadtest/dtype_intel/`); AVX512-BF16 alone pays on AMD Zen 4.

int8 recurrent layers (`models/quantize.py`) beat both on the Xeon with AMX (family 6 model
207): at 10 and 20 streams they halved the median latency against bf16 and cut p98 by a
third, at the same WER (`experiments/loadtest/int8/`); the recurrence's weights, read at every
step, take a quarter of fp32's bytes. On AMD Zen 5 (family 26) the same held for the shipped
pair of networks: at 10, 20 and 40 streams int8 cut the median and p98 by a third to a half
against bf16, and for one network it was level (`experiments/ensemble.md`).
On an AVX2-only AMD Zen 3 (family 25 model 1, no bf16 units) int8 served the pair at 10
streams with half of fp32's median latency and at 20 streams where fp32 fell behind real time
(`experiments/loadtest/int8_avx2/`): the step reads its weights in a quarter of the bytes through
fbgemm's AVX2 kernels, a reason that holds on any AVX2 CPU without bf16 units, so those get
int8 too. On AMD Zen 4 (family 25 model 17, AVX512-BF16) two side-by-side runs of one network
found int8 faster than bf16 too: at 60 streams p98 252 against 761 ms, then 285 against 373
(`experiments/real_people/README.md`). So: fp16 on CUDA; int8 where the CPU flags show AMX,
on AMD CPUs with bf16 units (Zen 4 on), and on AVX2 CPUs without native bf16 units; bf16 on
another CPU that is neither Intel's nor AMD's with native bf16 units; fp32 elsewhere (an
Intel CPU with AVX512-BF16 but no AMX, a CPU without AVX2, or flags that cannot be read).

The same CPU facts decide `harken train --precision auto` (bf16 only on native bf16 units) and
label every benchmark's figures (`cpu_description`), so they live here, below the server and
the training tools; `server/precision.py` re-exports them.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # Linux /proc/cpuinfo names of native bf16 units
CPUINFO = Path("/proc/cpuinfo")


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


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first CPU's feature flags (Linux); empty where /proc/cpuinfo is not readable."""
    return frozenset(_first("flags", cpuinfo).split())


def bf16_units(flags: frozenset[str] | None = None) -> list[str]:
    """The native bf16 units among a CPU's flags (this machine's by default), sorted."""
    return sorted(set(BF16_FLAGS) & (cpu_flags() if flags is None else flags))


def cpu_vendor(cpuinfo: Path = CPUINFO) -> str:
    """ "GenuineIntel", "AuthenticAMD", ... ("" where /proc/cpuinfo is not readable)."""
    return _first("vendor_id", cpuinfo)


def cpu_family(cpuinfo: Path = CPUINFO) -> int:
    """The first CPU's family number (AMD Zen 4 is 25, Zen 5 is 26); 0 where unknown."""
    family = _first("cpu family", cpuinfo)
    return int(family) if family.isdigit() else 0


def cpu_description(cpuinfo: Path = CPUINFO) -> str:
    """The CPU as benchmark results name it: model name, family and model (a VM may call
    every EPYC generation "AMD EPYC"), its native bf16 units and the cores this process may
    use, e.g. "AMD EPYC (family 26 model 2; avx512_bf16; 2 cores)". Timings differ most
    between CPU kinds, so each figure carries this."""
    name = _first("model name", cpuinfo) or platform.processor() or platform.machine()
    family, model = _first("cpu family", cpuinfo), _first("model", cpuinfo)
    units = bf16_units(cpu_flags(cpuinfo))
    details = [f"family {family} model {model}"] if family and model else []
    details += [", ".join(units) or "no bf16 units", f"{len(os.sched_getaffinity(0))} cores"]
    return f"{name} ({'; '.join(details)})"


ZEN4_FAMILY = 25  # AMD's Zen 3 and Zen 4; Zen 4 is the first with bf16 units


def resolve_dtype(
    requested: str,
    device: str,
    flags: frozenset[str] | None = None,
    vendor: str | None = None,
    family: int | None = None,
) -> tuple[str, str]:
    """The dtype to load the model in, and why (for the start-up log)."""
    if requested != "auto":
        return requested, "as configured"
    if device == "cuda":
        return "fp16", "auto: fp16 on CUDA (DS2 §7.2)"
    flags = cpu_flags() if flags is None else flags
    units = bf16_units(flags)
    vendor = cpu_vendor() if vendor is None else vendor
    if "amx_bf16" in units:
        return "int8", (
            "auto: int8 recurrent layers, on this CPU with AMX "
            "(measured faster than bf16 and fp32 there: experiments/loadtest/int8)"
        )
    family = cpu_family() if family is None else family
    if units and vendor == "AuthenticAMD" and family >= ZEN4_FAMILY:
        return "int8", (
            "auto: int8 recurrent layers, on this AMD CPU with bf16 units (Zen 4 and Zen 5 "
            "measured faster than bf16 there: experiments/real_people/README.md, "
            "experiments/ensemble.md)"
        )
    if units == ["avx512_bf16"] and vendor == "GenuineIntel":
        return "fp32", (
            "auto: fp32, this Intel CPU shows AVX512-BF16 but no AMX "
            "(bf16 measured slower there: experiments/loadtest/dtype_intel)"
        )
    if units:
        return "bf16", f"auto: bf16, this CPU has native bf16 units ({', '.join(units)})"
    if "avx2" in flags:
        return "int8", (
            "auto: int8 recurrent layers, on this AVX2 CPU without native bf16 units "
            "(measured faster than fp32 there: experiments/loadtest/int8_avx2)"
        )
    return "fp32", "auto: fp32, this CPU has neither native bf16 units nor AVX2"
