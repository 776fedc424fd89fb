"""The softmax family's rules alone on CuPy: their whole-rule kernels on and off.

Each rule of :mod:`numoracle.oracle.traced.library.softmax` at the table's realistic
sizes (softmax 256 x 4096, the attention's safe softmax 2 x 8 x 256 x 256, the
cross-entropy's log-softmax 256 x 32000 and its backward with a one-hot gradient), on
exact inputs on the GPU, with ``NUMORACLE_DEVICE_ROWS`` 1 and 0: host and device time
per call (``cupyx.profiler.benchmark``: the best of ``--repeats`` after a warm-up), and
torch float64 eager of the same op on the same GPU.

    python -m benchmarks.traced.rows_device --out DIR [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_json, write_text

__all__ = ["main"]

#: name -> (shape, which rule)
CASES: dict[str, tuple[tuple[int, ...], str]] = {
    "softmax": ((256, 4096), "softmax"),
    "safe_softmax (attention)": ((2, 8, 256, 256), "safe_softmax"),
    "log_softmax (cross-entropy)": ((256, 32000), "log_softmax"),
    "log_softmax backward (cross-entropy)": ((256, 32000), "backward"),
}


def _calls(cp: Any, shape: tuple[int, ...], kind: str) -> tuple[Any, Any]:
    """The rule on CuPy and torch's float64 op on the GPU, as calls of no argument."""
    from numoracle.oracle.precision import get_model  # noqa: PLC0415 - after torch
    from numoracle.oracle.traced.library import softmax as sm  # noqa: PLC0415
    from numoracle.oracle.traced.rules import RuleContext  # noqa: PLC0415
    from numoracle.oracle.tracked import exact  # noqa: PLC0415

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    ctx = RuleContext(get_model("bf16"), xp=cp)
    t = exact(cp.asarray(x))
    tx = torch.from_numpy(x).cuda()
    if kind == "softmax":
        return (lambda: sm.softmax(ctx, t, -1)), (lambda: torch.softmax(tx, -1))
    if kind == "safe_softmax":
        return ((lambda: sm.softmax(ctx, t, -1, masked_rows="zero")),
                (lambda: torch.ops.aten._safe_softmax(tx, -1)))
    if kind == "log_softmax":
        return (lambda: sm.log_softmax(ctx, t, -1)), (lambda: torch.log_softmax(tx, -1))
    g = np.zeros(shape)
    g[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] = -1.0 / shape[0]
    y = sm.log_softmax(ctx, t, -1)
    gt, tg = exact(cp.asarray(g)), torch.from_numpy(g).cuda()
    ty = torch.log_softmax(tx, -1)
    return ((lambda: sm.log_softmax_backward_rule(ctx, gt, y, -1)),
            (lambda: torch.ops.aten._log_softmax_backward_data(tg, ty, -1, torch.float64)))


def _best(cp: Any, fn: Any, repeats: int) -> tuple[float, float]:
    """The least host and device seconds of ``repeats`` calls after two warm-ups."""
    from cupyx.profiler import benchmark  # noqa: PLC0415 - CuPy only

    r = benchmark(fn, n_repeat=repeats, n_warmup=2)
    return float(np.min(r.cpu_times)), float(np.min(r.gpu_times))


def _write(out: Path, repeats: int, rows: list[dict[str, Any]]) -> None:
    info = meta(sys.argv)
    write_json(out / "rules.json", {"meta": info, "rows": rows})
    lines = ["# The softmax family's rules on CuPy, whole-rule kernels on and off", "",
             f"Command: `{info['command']}`; commit {info['commit']}; best of {repeats} "
             "(cupyx.profiler.benchmark) after two warm-ups; exact bf16-claim inputs.", "",
             "| rule | shape | kernels | host | device | torch fp64 eager (device) | ratio |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['rule']} | {r['shape']} | {r['kernels']} | {r['error']} "
                         "| | | |")
            continue
        wall = max(r["host_s"], r["device_s"])
        lines.append(f"| {r['rule']} | {r['shape']} | {'on' if r['kernels'] else 'off'} | "
                     f"{r['host_s'] * 1e3:.2f} ms | {r['device_s'] * 1e3:.2f} ms | "
                     f"{r['eager_s'] * 1e3:.3f} ms | {wall / r['eager_s']:.1f}x |")
    write_text(out / "rules.md", "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    import cupy as cp  # noqa: PLC0415 - a GPU's

    from numoracle.oracle.fused import DEVICE_ROWS_VARIABLE  # noqa: PLC0415

    rows: list[dict[str, Any]] = []
    for name, (shape, kind) in CASES.items():
        for switch in ("1", "0"):
            os.environ[DEVICE_ROWS_VARIABLE] = switch
            try:
                rule, eager = _calls(cp, shape, kind)
                host, device = _best(cp, rule, a.repeats)
                e_host, e_device = _best(cp, eager, a.repeats)
                rows.append({"rule": name, "shape": list(shape), "kernels": switch == "1",
                             "host_s": host, "device_s": device, "eager_s": e_device,
                             "eager_host_s": e_host})
            except Exception as exc:  # noqa: BLE001 - a row's failure is recorded, the rest run
                rows.append({"rule": name, "shape": list(shape), "kernels": switch == "1",
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(rows[-1], flush=True)
            _write(Path(a.out), a.repeats, rows)  # (each row: a time limit keeps the rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
