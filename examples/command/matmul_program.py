"""The C matmul kernel behind the command-target protocol (for the overhead
benchmark: the same kernel as the shared-library target, called from a program).

    python matmul_program.py LIB CASE_DIR         # once per case
    python matmul_program.py LIB --persistent     # case folders on stdin
"""

import ctypes
import json
import math
import sys
from pathlib import Path

import numpy as np


def solve(func, folder: Path) -> None:
    m = json.loads((folder / "manifest.json").read_text())
    a = np.ascontiguousarray(np.load(folder / "a.npy"))
    b = np.ascontiguousarray(np.load(folder / "b.npy"))
    p = m["params"]
    out = np.empty(m["outputs"]["out"]["shape"], dtype=np.float32)
    func(a.ctypes.data, b.ctypes.data, out.ctypes.data, math.prod(p["batch_shape"]),
         p["m"], p["k"], p["n"])
    np.save(folder / "out.npy", out)


def main() -> int:
    func = ctypes.CDLL(sys.argv[1]).matmul_f32
    func.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int32] * 4
    if "--persistent" not in sys.argv:
        solve(func, Path(sys.argv[2]))
        return 0
    for line in sys.stdin:
        try:
            solve(func, Path(line.strip()))
            print("ok", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported to numoracle
            print(f"error {type(exc).__name__}: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
