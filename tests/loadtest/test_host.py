"""loadtest names its host's CPU with its own copy of `models.precision.cpu_description`
(loadtest imports nothing of ours but the server's protocol): the two must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.host import cpu_description, machine
from models.precision import cpu_description as models_cpu_description

CPUINFO = {
    "epyc": "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
    "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n",
    "xeon_amx": "model name\t: Intel Xeon\ncpu family\t: 6\nmodel\t: 207\n"
    "flags\t: avx2 amx_tile amx_bf16 avx512_bf16\n",
    "no_family": "model name\t: Some CPU\nflags\t: sse2\n",
    "empty": "",
}


@pytest.mark.parametrize("kind", sorted(CPUINFO))
def test_the_cpu_is_named_as_the_benchmarks_name_it(tmp_path: Path, kind: str) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO[kind])
    assert cpu_description(info) == models_cpu_description(info)
    missing = tmp_path / "absent"
    assert cpu_description(missing) == models_cpu_description(missing)


def test_machine_names_this_host() -> None:
    host = machine()
    assert host["cpu"] == models_cpu_description() and host["cores"]
