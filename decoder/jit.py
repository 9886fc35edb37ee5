"""How the search's hot loops are compiled (numba, cached on disk, no fast-math), and the
numpy reductions they must reproduce exactly.

Fast-math stays off so that the compiled loops do the same IEEE operations in the same
order as the numpy code they replaced, and give the same results bit for bit. Compiled
code is cached next to its source (`__pycache__`), so a process loads it in milliseconds
after the first one compiled it; `decoder.beam.warm_up` does that once per process.

numba checks only the source file of a cached function for changes, not the files of the
functions it calls: a kernel module keeps what its kernels depend on (the tree's column
layout included) in its own file. The two helpers here mirror numpy and never change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

F = TypeVar("F", bound=Callable[..., Any])
LN2 = math.log(2.0)
_BLOCK = 128  # numpy's pairwise summation: unrolled blocks up to this many
_BUFFER = 8192  # numpy's reductions: at most this many elements per inner loop


def kernel(fn: F) -> F:
    """Compile `fn` with numba in nopython mode (GIL released, errors as numpy's), cached
    on disk where numba finds a writable place (the package's __pycache__, NUMBA_CACHE_DIR
    or the user's cache), else in memory only, so a read-only install still works."""
    try:
        compiled = numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        compiled = numba.njit(cache=False, nogil=True, error_model="numpy")(fn)
    return cast(F, compiled)


@kernel
def logaddexp(x: float, y: float) -> float:
    """numpy's logaddexp, operation for operation (so that results match it bit for bit)."""
    if x == y:
        return x + LN2
    d = x - y
    if d > 0:
        return x + math.log1p(math.exp(-d))
    if d <= 0:
        return y + math.log1p(math.exp(d))
    return d  # NaN


@kernel
def array_sum(a: npt.NDArray[np.float64]) -> float:
    """`a.sum()` of a contiguous 1-d array, in numpy's order: pairwise, per buffer."""
    total = 0.0
    for lo in range(0, a.size, _BUFFER):
        total += _pairwise(a, lo, min(_BUFFER, a.size - lo))
    return total


@kernel
def _pairwise(a: npt.NDArray[np.float64], lo: int, n: int) -> float:
    """numpy's pairwise_sum of a[lo : lo + n]: unrolled by 8 up to a block, halved above."""
    if n < 8:
        total = 0.0
        for i in range(lo, lo + n):
            total += a[i]
        return total
    if n <= _BLOCK:
        r = a[lo : lo + 8].copy()
        i = 8
        while i < n - n % 8:
            r += a[lo + i : lo + i + 8]
            i += 8
        total = float(((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])))
        while i < n:
            total += a[lo + i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    left: float = _pairwise(a, lo, half)
    right: float = _pairwise(a, lo + half, n - half)
    return left + right
