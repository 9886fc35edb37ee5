"""KenLM's command-line tools (`lmplz`, `build_binary`), built once from its source release.

The `kenlm` Python module can query a model but not estimate one, so `harken build-lm`
needs the C++ tools. They come from the same source release the Python module is built
from (PyPI's sdist, which carries `lm/builder`), compiled with cmake against Debian's boost
packages (installed by scripts/setup.sh), and cached under `third_party/kenlm/bin`, so
only the first call pays the few minutes of compilation.

Run `python -m decoder.kenlm_tools` to build them ahead of time (scripts/setup.sh does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

KENLM_VERSION = "0.3.0"  # the sdist pinned here; the same release as the Python module
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / "third_party" / "kenlm"
TOOLS = ("lmplz", "build_binary")


@dataclass(frozen=True)
class KenLMTools:
    """Paths of the two executables."""

    lmplz: Path
    build_binary: Path


def cached_tools(cache: Path = DEFAULT_CACHE) -> KenLMTools | None:
    """The tools if a previous build left them in `cache`, else None (nothing is built)."""
    bins = [cache / "bin" / name for name in TOOLS]
    if all(os.access(b, os.X_OK) for b in bins):
        return KenLMTools(*bins)
    return None


def ensure_tools(cache: Path = DEFAULT_CACHE, jobs: int | None = None) -> KenLMTools:
    """Return the tools, downloading and compiling KenLM first if they are not cached."""
    found = cached_tools(cache)
    if found is not None:
        return found
    _require_programs("cmake", "make", "c++")
    source = _fetch_source(cache / "src")
    _compile(source, cache / "build", jobs or os.cpu_count() or 1)
    (cache / "bin").mkdir(parents=True, exist_ok=True)
    for name in TOOLS:
        shutil.copy2(cache / "build" / "bin" / name, cache / "bin" / name)
    built = cached_tools(cache)
    assert built is not None, "the build finished but left no executables"
    return built


def _require_programs(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise RuntimeError(
            f"building KenLM needs {', '.join(missing)}; run make setup-synth "
            "(it installs cmake, a C++ compiler and the boost packages)"
        )


def _fetch_source(dest: Path) -> Path:
    """Download and unpack KenLM's sdist from PyPI (no build: only the tarball)."""
    root = dest / f"kenlm-{KENLM_VERSION}"
    if (root / "lm" / "builder").is_dir():
        return root
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation"]
    pip += ["--no-binary", "kenlm", f"kenlm=={KENLM_VERSION}", "-d", str(dest), "-q"]
    subprocess.run(pip, check=True)
    with tarfile.open(dest / f"kenlm-{KENLM_VERSION}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    if not (root / "lm" / "builder").is_dir():
        raise RuntimeError(f"{root} has no lm/builder: this KenLM release cannot build lmplz")
    return root


def _compile(source: Path, build: Path, jobs: int) -> None:
    build.mkdir(parents=True, exist_ok=True)
    configure = ["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run([*configure, "-DCOMPILE_TESTS=OFF", "-DENABLE_PYTHON=OFF"], check=True)
    make = ["cmake", "--build", str(build), "-j", str(jobs), "--target", *TOOLS]
    subprocess.run(make, check=True)


if __name__ == "__main__":
    tools = ensure_tools()
    print(f"lmplz: {tools.lmplz}\nbuild_binary: {tools.build_binary}")
