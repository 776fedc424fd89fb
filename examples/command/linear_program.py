"""A linear layer as an external program: the command-target protocol.

Once per case:   python linear_program.py CASE_DIR
Persistent:      python linear_program.py --persistent
                 (reads one case folder per line on stdin, answers "ok" or
                 "error MESSAGE" on stdout)

Each case folder holds the inputs as NAME.npy and manifest.json, whose
"outputs" lists the files to write. --bug plants a bug: grad_input is computed
from float16-rounded operands (a half-precision path left switched on).
"""

import json
import sys
from pathlib import Path

import numpy as np

BUG = "--bug" in sys.argv


def solve(folder: Path) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    arrays = {name: np.load(folder / info["file"]) for name, info in manifest["inputs"].items()}
    x, w, g = arrays["x"], arrays["weight"], arrays["grad_output"]
    with np.errstate(all="ignore"):  # infinities in, infinities out
        out = compute(x, w, g, arrays.get("bias"))
    for name, info in manifest["outputs"].items():
        np.save(folder / info["file"], out[name].astype(info["dtype"]))


def compute(x, w, g, bias):
    y = x @ w.T
    if bias is not None:
        y = y + bias
    if BUG:
        gi = g.astype(np.float16).astype(np.float32) @ w.astype(np.float16).astype(np.float32)
    else:
        gi = g @ w
    return {"y": y, "grad_input": gi, "grad_weight": g.T @ x, "grad_bias": g.sum(axis=0)}


def main() -> int:
    if "--persistent" not in sys.argv:
        solve(Path(sys.argv[-1]))
        return 0
    for line in sys.stdin:
        try:
            solve(Path(line.strip()))
            print("ok", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported to numoracle, which fails the case
            print(f"error {type(exc).__name__}: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
