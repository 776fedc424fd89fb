"""Host memory reuse for the oracle's large temporaries.

The reference of a contraction allocates a handful of output-sized float64
arrays (value, magnitude, radii) per call. glibc serves blocks above its mmap
threshold with fresh pages from the kernel and returns them on free, so every
such array pays a page fault per 4 KiB page when first written; on some
virtual machines that costs more than the arithmetic (the timings are in
``benchmarks/results/cpu/oracle_speed/``).
:func:`reuse_freed_memory` asks glibc to keep freed memory for reuse instead.
It changes the allocator of the whole process (its resident size stays at its
peak): a checking run turns it on (:func:`reuse_for_checking`, from
:func:`~numoracle.running.runner.run_target`: the command line, the pytest
plugin, :func:`numoracle.check_kernel`) unless ``NUMORACLE_REUSE_MEMORY=0`` is
in the environment; importing numoracle changes nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

__all__ = ["reuse_freed_memory", "reuse_for_checking"]

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def reuse_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Serve blocks up to ``limit_bytes`` from the heap and keep freed memory
    for reuse (glibc ``mallopt``); returns False where the C library is not
    glibc (nothing changes).

    Examples
    --------
    >>> from numoracle.oracle.memory import reuse_freed_memory
    >>> reuse_freed_memory()  # doctest: +SKIP
    True
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, min(int(limit_bytes), 1 << 30))
    ok &= mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)
    ok &= mallopt(_M_TOP_PAD, 64 << 20)
    return bool(ok)


@cache
def reuse_for_checking() -> bool:
    """:func:`reuse_freed_memory` once per process, for a checking run, unless the
    environment says ``NUMORACLE_REUSE_MEMORY=0``; returns whether it is on."""
    if os.environ.get("NUMORACLE_REUSE_MEMORY", "1") == "0":
        return False
    return reuse_freed_memory()
