"""Layer norm's device kernels (``numoracle/oracle/_norm_cuda.py``) compiled on the host:
the same C text, through ``rows_harness``'s shim of CUDA's few names and its callers
(CuPy's calling conventions on NumPy arrays), by g++ without contraction. A text
changed by ``mutate`` compiles into a library of its own (the tests show that the
comparisons catch a changed kernel). :func:`build` is ``fused_norm_cuda.build``'s
stand-in.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rows_harness as rh

from numoracle.oracle import _norm_cuda as src
from numoracle.oracle._rows_cuda import Elementwise, PerRow

_LIBS: dict[str, Any] = {}


def source(mutate: Callable[[str], str] | None = None) -> str:
    """The host translation unit: the shim, the preamble and every kernel (changed by
    ``mutate``)."""
    parts = [rh.SHIM, src.PREAMBLE]
    for k in src.specs():
        parts.append(rh._elementwise_source(k) if isinstance(k, Elementwise)
                     else rh._per_row_source(k))
    text = "\n".join(parts)
    return text if mutate is None else mutate(text)


def library(text: str) -> Any:
    """``text`` compiled into a shared library (once per process and text)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if digest in _LIBS:
        return _LIBS[digest]
    gxx = shutil.which("g++")
    assert gxx is not None, "g++ is needed"
    folder = Path(tempfile.gettempdir()) / "numoracle_norm_harness"
    folder.mkdir(exist_ok=True)
    so = folder / f"norm_{digest}.so"
    if not so.exists():
        cpp = folder / f"norm_{digest}.{os.getpid()}.cpp"  # (parallel workers apart)
        cpp.write_text(text)
        tmp = folder / f"norm_{digest}.{os.getpid()}.so"
        subprocess.run([gxx, "-O2", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC",
                        "-std=c++20", "-pthread", "-o", str(tmp), str(cpp)], check=True,
                       capture_output=True, text=True)
        tmp.replace(so)
    _LIBS[digest] = ctypes.CDLL(str(so))
    return _LIBS[digest]


def build(spec: Elementwise | PerRow, threads: int = 1,
          mutate: Callable[[str], str] | None = None) -> Any:
    """The host's kernel of ``spec`` (a block per row run by ``threads`` threads), from
    the text changed by ``mutate``."""
    lib = library(source(mutate))
    if isinstance(spec, Elementwise):
        return rh._ElementwiseCall(lib, spec)
    return rh._PerRowCall(lib, spec, threads)
