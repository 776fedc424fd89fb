"""The CUDA C example on a GPU: correct version over many cases on CuPy and
torch CUDA device pointers, the planted bug's cases-to-catch and shrunk shape,
and the overhead per call of a shared-library target against calling the same
.so from Python by hand on the same device arrays.

    python benchmarks/foreign_gpu.py OUT LIB LIB_BUG [--examples N]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from numoracle.cases.case import Case
from numoracle.foreign import run, shared_library_target
from numoracle.kernels.backends import get_backend

ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_input", "grad_weight",
        "batch", "in_features", "out_features", "stream"]


def target(lib: str, backend: str, tmp: Path):
    return shared_library_target(lib, "linear_f32_cuda", op="linear", args=ARGS, device="cuda",
                                 backend=backend, returns="status",
                                 error_symbol="linear_last_error", spec_dir=tmp,
                                 name=f"cuda-linear-{backend}" + ("-bug" if "bug" in lib else ""))


def overhead(lib: str, tmp: Path, n: int) -> dict:
    import cupy  # noqa: PLC0415

    t = target(lib, "cupy", tmp)
    case = Case("linear", {"batch": 64, "in_features": 64, "out_features": 64, "bias": True})
    be = get_backend("cupy")
    inputs = {k: be.to_device(v, "fp32") for k, v in case.inputs().items()}
    func = ctypes.CDLL(lib).linear_f32_cuda
    func.restype = ctypes.c_int
    func.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int32] * 3 + [ctypes.c_void_p]
    outs = [cupy.empty((64, 64), cupy.float32) for _ in range(3)]

    def by_hand():
        st = cupy.cuda.get_current_stream()
        func(*(inputs[k].data.ptr for k in ("x", "weight", "bias", "grad_output")),
             *(o.data.ptr for o in outs), 64, 64, 64, st.ptr)
        st.synchronize()

    rows = {}
    for label, call in (("python ctypes by hand", by_hand), ("shared library target",
                                                             lambda: t.fn(**inputs))):
        call()
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        rows[label] = round((time.perf_counter() - t0) / n * 1e3, 4)
    return {"case": "linear 64x64x64 fp32, cupy", "call_ms": rows}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("lib")
    p.add_argument("lib_bug")
    p.add_argument("--examples", type=int, default=200)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"machine": {"python": platform.python_version(), "command": " ".join(sys.argv)}}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("cupy", "torch-cuda"):
            specs = a.out / "targets"  # the repros in OUT/repros rebuild from these
            good, bad = target(a.lib, backend, specs), target(a.lib_bug, backend, specs)
            if good.unavailable_reason():
                result[backend] = {"skipped": good.unavailable_reason()}
                continue
            rg = run(good, examples=a.examples, store=None)
            rb = run(bad, examples=a.examples, store=a.out / "repros")
            result[backend] = {
                "correct": {"verdict": rg.verdict, "cases": rg.cases,
                            "worst_ratio": rg.worst_ratio, "seconds": round(rg.seconds, 1)},
                "planted_bug": {"verdict": rb.verdict, "cases_to_catch": rb.cases_to_catch,
                                "shrunk_shape": rb.repro_shape, "diagnosis": rb.diagnosis}}
            print(backend, json.dumps(result[backend]), flush=True)
        if "skipped" not in result["cupy"]:
            result["overhead"] = overhead(a.lib, Path(tmp), 1000)
    (a.out / "foreign_gpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
