"""`--dtype auto`: fp16 on CUDA, int8 on a CPU with AMX, an AMD Zen 5 or an AVX2 CPU without
bf16 units, bf16 where a CPU's native bf16 units were measured to pay, fp32 elsewhere; and
the default model in bf16 or int8 still hears real words (whatever this machine's CPU)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from server.config import DEFAULT_BUNDLE, ServerConfig
from server.engine import running_engine
from server.precision import (
    cpu_description,
    cpu_family,
    cpu_flags,
    cpu_vendor,
    resolve_dtype,
)
from server.recording import transcribe
from tests.server.serving import speak

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})


INTEL, AMD = "GenuineIntel", "AuthenticAMD"


@pytest.mark.parametrize(
    ("device", "flags", "vendor", "family", "dtype"),
    [
        ("cuda", AVX2, INTEL, 6, "fp16"),
        ("cpu", AVX2 | {"avx512_bf16"}, AMD, 25, "int8"),  # AMD Zen 4
        ("cpu", AVX2 | {"avx512_bf16", "avx512_vnni"}, AMD, 26, "int8"),  # AMD Zen 5
        (
            "cpu",
            AVX2 | {"amx_bf16", "amx_tile", "avx512_bf16"},
            INTEL,
            6,
            "int8",
        ),  # Sapphire Rapids
        ("cpu", AVX2 | {"avx512_bf16", "avx512_fp16"}, INTEL, 6, "fp32"),  # its AMX hidden
        ("cpu", AVX2, AMD, 25, "int8"),  # AMD Zen 3: AVX2 only
        ("cpu", AVX2 | {"avx512f", "avx512_vnni"}, INTEL, 6, "int8"),  # Cascade Lake: no bf16
        ("cpu", AVX2 | {"avx512_bf16"}, "ARMish", 0, "bf16"),  # native bf16, neither vendor
        ("cpu", frozenset({"sse4_2", "avx"}), INTEL, 6, "fp32"),  # no AVX2: no fbgemm kernels
        ("cpu", frozenset(), "", 0, "fp32"),  # flags unreadable (not Linux)
    ],
)
def test_auto_follows_the_hardware(
    device: str, flags: frozenset[str], vendor: str, family: int, dtype: str
) -> None:
    chosen, why = resolve_dtype("auto", device, flags, vendor, family)
    assert chosen == dtype and why.startswith(f"auto: {dtype}")


def test_an_explicit_dtype_is_kept() -> None:
    assert resolve_dtype("fp32", "cpu", frozenset({"amx_bf16"}))[0] == "fp32"
    assert resolve_dtype("bf16", "cpu", AVX2)[0] == "bf16"


def test_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 avx512_bf16\n"
        "bugs\t\t: none\n"
    )
    assert cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_vendor(info) == "GenuineIntel"
    assert cpu_family(info) == 0  # no family line
    info.write_text("vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n")
    assert cpu_family(info) == 26
    assert cpu_flags(tmp_path / "missing") == frozenset()
    assert cpu_vendor(tmp_path / "missing") == ""


def test_benchmarks_name_the_cpu_kind_not_just_its_brand(tmp_path: Path) -> None:
    """A VM calls every EPYC generation "AMD EPYC": family, model and bf16 units tell them
    apart, and a benchmark figure is only comparable within one kind."""
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n"
    )
    cores = len(os.sched_getaffinity(0))
    assert cpu_description(info) == f"AMD EPYC (family 26 model 2; avx512_bf16; {cores} cores)"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2\n")
    assert cpu_description(info) == f"Some CPU (no bf16 units; {cores} cores)"


@pytest.mark.parametrize("dtype", ["bf16", "int8"])
def test_the_default_model_in_reduced_precision_hears_a_sentence(dtype: str) -> None:
    sentence = "the weather is nice today and we will go for a long walk"

    # one stream: a small max_batch spares start-up's warm steps of every batch size, which in
    # bf16 on a CPU without bf16 units (emulated, several times slower) took four minutes
    config = ServerConfig(dtype=dtype, bundle=DEFAULT_BUNDLE, max_batch=2)

    async def run() -> str:
        async with running_engine(config) as engine:
            return (await transcribe(engine, speak(sentence)))[1].text

    heard = asyncio.run(run()).split()
    assert len(set(heard) & set(sentence.split())) >= 8, heard
