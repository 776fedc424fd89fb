"""Training demo: scikit-learn's digits (8x8 images, 10 classes), a 64-32-32-10 MLP trained
by the two-phase trainer (CuPy kernels on a GPU, the host float32 trainer elsewhere) with SGD,
momentum, Adam, and Adam with the seed-003 defect (the update applied per sample); each
epoch's test accuracy beside the oracle's teacher-forced verdict on that epoch's steps.

Usage: ``python benchmarks/optim_demo.py OUT_DIR [--epochs N] [--data digits.npz]``
(``--data``: an .npz with ``x``, ``y``, for machines without scikit-learn).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def load(path: Path | None) -> tuple[np.ndarray, np.ndarray]:
    if path is not None and path.exists():
        d = np.load(path)
        return d["x"].astype(np.float32), d["y"].astype(np.int64)
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("scikit-learn is not installed and no --data file given: demo skipped")
        sys.exit(0)
    d = load_digits()
    return d.data.astype(np.float32), d.target.astype(np.int64)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--data", type=Path)
    a = ap.parse_args()
    from numoracle.kernels import get_backend
    from numoracle.oracle.mlp import PARAMS
    from numoracle.oracle.optim_math import OptimConfig
    from numoracle.trajectory import check_mlp_trajectory

    x, y = load(a.data)
    x = x / np.float32(16.0)  # pixel values 0..16
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    n_test = len(x) // 5
    xt, yt, xtr, ytr = x[:n_test], y[:n_test], x[n_test:], y[n_test:]
    gpu = get_backend("cupy").available() is None
    if gpu:
        from numoracle.kernels.cupy_mlp import cupy_mlp_step as make
    else:
        from numoracle.kernels.optim_targets import numpy_mlp_step as make
    f = np.float32
    p0 = {"w1": (rng.standard_normal((32, 64)) / 8).astype(f), "b1": np.zeros(32, f),
          "w2": (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(f), "b2": np.zeros(32, f),
          "w3": (rng.standard_normal((10, 32)) / np.sqrt(32)).astype(f), "b3": np.zeros(10, f)}
    runs = {"sgd": (OptimConfig("sgd", lr=0.1), ()),
            "momentum": (OptimConfig("sgd", lr=0.05, momentum=0.9), ()),
            "adam": (OptimConfig("adam", lr=0.005), ()),
            "adam (update per sample: seed-003 bug)": (OptimConfig("adam", lr=0.005),
                                                       ("per_sample_update",))}
    per_epoch = len(xtr) // a.batch
    result = {"device": "gpu (CuPy kernels)" if gpu else "cpu (host float32 trainer)",
              "runs": {}}
    for name, (cfg, bugs) in runs.items():
        step = make(cfg, bugs)
        cur: dict[str, np.ndarray] = dict(p0)
        xs, ls, rec, acc = [], [], [], []
        k = 0
        for _ in range(a.epochs):
            perm = rng.permutation(len(xtr))
            for b in range(per_epoch):
                idx = perm[b * a.batch:(b + 1) * a.batch]
                k += 1
                out = step({p: cur[p] for p in PARAMS}, {n: v for n, v in cur.items()
                                                         if "." in n}, xtr[idx], ytr[idx], k)
                xs.append(xtr[idx])
                ls.append(ytr[idx])
                rec.append(out)
                cur = {n: v for n, v in out.items() if n in PARAMS or "." in n}
            h = np.maximum(xt @ cur["w1"].T + cur["b1"], 0)
            h = np.maximum(h @ cur["w2"].T + cur["b2"], 0)
            pred = np.argmax(h @ cur["w3"].T + cur["b3"], axis=1)
            acc.append(float(np.mean(pred == yt)))
        v = check_mlp_trajectory(lambda *args, rec=rec: rec[args[-1] - 1], cfg, p0, xs, ls,
                                 free_running=False, diagnose_failure=False)
        epochs = []
        for e in range(a.epochs):
            sv = v.steps[e * per_epoch:(e + 1) * per_epoch]
            bad = [s for s in sv if not s.passed]
            epochs.append({"epoch": e + 1, "test_accuracy": round(acc[e], 4),
                           "steps_checked": len(sv), "steps_failing": len(bad),
                           "worst_ratio": max((s.worst_ratio for s in sv), default=0.0)})
        ff = v.first_failure
        result["runs"][name] = {"epochs": epochs, "verdict": "pass" if v.passed else
                                f"FAIL first at {ff}"}
        print(f"{name}: " + ", ".join(f"e{r['epoch']} acc {r['test_accuracy']:.3f} "
                                      f"({'ok' if not r['steps_failing'] else 'FAIL'})"
                                      for r in epochs))
        print(f"  verdict: {result['runs'][name]['verdict'][:300]}")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "optim_demo.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
