"""What a whole official judgement holds and copies, measured on the host: the
comparison of a large output whole and a piece at a time, KernelBench's
``allclose`` on float64 copies and a piece at a time, the interpreter's held
values along a chain of ops, and the candidate's input check by whole copies and
in place.

NumPy's allocations are counted by ``tracemalloc`` (CuPy's pool follows the same
operations on a GPU: the arrays a step makes, not their bytes' speed). Each peak
is in units of one float64 array of the output's elements (``A``).

    python -m benchmarks.kernelbench.lean_probe [--elements 16777216] --out FILE.json
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main"]


def _peak(fn: Callable[[], Any]) -> tuple[float, float]:
    """(peak bytes above what was held before, seconds) of ``fn()``."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return float(peak), seconds


def _comparison(n: int) -> dict[str, Any]:
    from numoracle.checking import ratios, verdict  # noqa: PLC0415
    from numoracle.oracle.tracked import bounded  # noqa: PLC0415

    rng = np.random.default_rng(0)
    v = rng.standard_normal((4096, n // 4096))
    ref = bounded(v, np.abs(v) * 2.0 ** -22, np.abs(v) * 2.0 ** -23, n=7)
    got = v.astype(np.float32)
    out = {}
    for how, piece in (("whole", 1 << 62), ("pieces", n // 16)):
        old = verdict.COMPARE_PIECE, ratios.SELECT_LEAST
        verdict.COMPARE_PIECE, ratios.SELECT_LEAST = piece, piece
        try:
            peak, seconds = _peak(lambda: verdict.compare("out", got, ref))
        finally:
            verdict.COMPARE_PIECE, ratios.SELECT_LEAST = old
        out[how] = {"peak_A": round(peak / (8 * n), 2), "seconds": round(seconds, 2)}
    return out


def _allclose(n: int) -> dict[str, Any]:
    from numoracle.kernelbench.reference import kernelbench_rule  # noqa: PLC0415

    rng = np.random.default_rng(1)
    ref = rng.standard_normal(n).astype(np.float32)
    got = ref + np.float32(1e-6) * ref

    def whole() -> None:
        for tol in (1e-2, 1e-4):
            np.allclose(ref.astype(np.float64), got.astype(np.float64), atol=tol, rtol=tol)
    from numoracle.kernelbench import reference  # noqa: PLC0415

    out = {}
    for how, fn in (("float64 copies", whole), ("pieces", lambda: kernelbench_rule(got, ref))):
        old, reference.RULE_PIECE = reference.RULE_PIECE, n // 16
        try:
            peak, seconds = _peak(fn)
        finally:
            reference.RULE_PIECE = old
        out[how] = {"peak_A": round(peak / (8 * n), 2), "seconds": round(seconds, 2)}
    return out


def _chain(n: int, length: int) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced import RuleContext  # noqa: PLC0415
    from numoracle.oracle.traced.capture import Reference, capture  # noqa: PLC0415
    from numoracle.oracle.traced.interpret import evaluate  # noqa: PLC0415

    def f(x: Any) -> Any:
        for _ in range(length):
            x = torch.relu(x) * 0.5
        return x
    x = np.random.default_rng(2).standard_normal(n)
    graph = capture(Reference(f, ("x",)), {"x": x[:64]})
    graph = capture(Reference(f, ("x",)), {"x": x})
    from numoracle.oracle.traced import interpret  # noqa: PLC0415

    ctx = RuleContext(get_model("fp32"))
    peak, seconds = _peak(lambda: evaluate(graph, {"x": x}, ctx))
    freeing = interpret._last_uses
    interpret._last_uses = lambda *a: {}  # every value kept to the end, as before
    try:
        kept, _ = _peak(lambda: evaluate(graph, {"x": x}, ctx))
    finally:
        interpret._last_uses = freeing
    return {"ops": 2 * length, "peak_A": round(peak / (8 * n), 2),
            "peak_A_every_value_kept": round(kept / (8 * n), 2), "seconds": round(seconds, 2)}


def _input_check(n: int) -> dict[str, Any]:
    from numoracle.kernelbench.guard import RawMemory  # noqa: PLC0415

    memory = RawMemory("cpu")
    a = np.random.default_rng(3).integers(0, 255, n, dtype=np.uint8)
    src = int(a.ctypes.data)

    def copies() -> None:
        before = memory.read(src, n)
        assert memory.read(src, n) == before

    def in_place() -> None:
        held = memory.snapshot(src, n)
        assert memory.same(src, ctypes.addressof(ctypes.c_char.from_buffer(held)), n)
    out = {}
    for how, fn in (("whole copies", copies), ("snapshot, in place", in_place)):
        t = time.perf_counter()
        fn()
        out[how] = {"seconds": round(time.perf_counter() - t, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure and write the JSON (see the module's docstring)."""
    from benchmarks.record import meta, write_json  # noqa: PLC0415

    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernelbench.lean_probe",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    n = args.elements
    result = {"meta": meta(argv), "elements": n,
              "comparison": _comparison(n), "kernelbench_allclose": _allclose(n),
              "interpreter_chain": [_chain(n // 4, k) for k in (1, 2, 8)],
              "input_check_bytes": {"bytes": 8 * n, **_input_check(8 * n)}}
    write_json(args.out, result)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
