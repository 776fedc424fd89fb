"""Layer norm's device kernels (``numoracle/oracle/_norm_cuda.py``) compiled on the host:
the same C text, through ``rows_harness``'s shim of CUDA's few names and its callers
(CuPy's calling conventions on NumPy arrays), by g++ without contraction. A text
changed by ``mutate`` compiles into a library of its own (the tests show that the
comparisons catch a changed kernel). :func:`build` is ``fused_norm_cuda.build``'s
stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import rows_harness as rh

from numoracle.oracle import _norm_cuda as src
from numoracle.oracle._rows_cuda import Elementwise, PerRow


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
    lib = rh.compiled(text, "norm")
    assert lib is not None, "g++ is needed"
    return lib


def build(spec: Elementwise | PerRow, threads: int = 1,
          mutate: Callable[[str], str] | None = None) -> Any:
    """The host's kernel of ``spec`` (a block per row run by ``threads`` threads), from
    the text changed by ``mutate``."""
    lib = library(source(mutate))
    if isinstance(spec, Elementwise):
        return rh._ElementwiseCall(lib, spec)
    return rh._PerRowCall(lib, spec, threads)
