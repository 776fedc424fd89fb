"""The traced oracle's cost per case against torch float64 eager, on one device.

Six references (softmax, layer norm, scaled dot-product attention, a convolution
with batch norm and ReLU, an MLP block, cross-entropy), each at a small and a
realistic size, forward and forward + backward (the gradients of every floating
input). Per row: the oracle's time per case (:meth:`TracedOp.reference` on a kept
graph: the reference and its bound, evaluated where the inputs live: NumPy on the
host for ``--device cpu``; on the GPU for ``--device cuda``, in the namespace
:func:`numoracle.oracle.xp.gpu_namespace` names: CuPy where it works unless
NUMORACLE_GPU_NAMESPACE=torch) and
torch float64 eager of the same function on the same device (the backward by
``torch.autograd.grad``), the best of ``--repeats`` runs (their medians recorded too)
after one warm-up (which captures the graph; its time is reported apart). A row that would overrun
``--budget`` seconds in all is skipped and says so.

    python -m benchmarks.traced.table --device cuda --out DIR [--repeats 3] [--budget 220]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.record import meta, write_json, write_text

__all__ = ["REFERENCES", "table", "main"]


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def conv_bn_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, mean: torch.Tensor,
                 var: torch.Tensor, g: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    y = F.conv2d(x, w, b, padding=1)
    return torch.relu(F.batch_norm(y, mean, var, g, beta, training=False))


def mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
        b2: torch.Tensor) -> torch.Tensor:
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels)


def _shapes(name: str, size: str) -> dict[str, tuple[int, ...]]:
    small = size == "small"
    if name == "softmax":
        return {"x": (8, 64) if small else (256, 4096)}
    if name == "layer_norm":
        n = 64 if small else 4096
        return {"x": (8 if small else 256, n), "w": (n,), "b": (n,)}
    if name == "attention":
        s = (1, 2, 16, 8) if small else (2, 8, 256, 64)
        return {"q": s, "k": s, "v": s}
    if name == "conv_bn_relu":
        nb, c, h = (2, 4, 8) if small else (8, 64, 32)
        return {"x": (nb, c, h, h), "w": (c, c, 3, 3), "b": (c,), "mean": (c,), "var": (c,),
                "g": (c,), "beta": (c,)}
    if name == "mlp":
        m, d, f = (8, 32, 128) if small else (256, 1024, 4096)
        return {"x": (m, d), "w1": (f, d), "b1": (f,), "w2": (d, f), "b2": (d,)}
    m, n = (8, 64) if small else (256, 32000)
    return {"logits": (m, n), "labels": (m,)}


#: name -> (function, the inputs whose gradients forward + backward computes)
REFERENCES: dict[str, tuple[Callable[..., torch.Tensor], tuple[str, ...]]] = {
    "softmax": (softmax, ("x",)),
    "layer_norm": (layer_norm, ("x", "w", "b")),
    "attention": (attention, ("q", "k", "v")),
    "conv_bn_relu": (conv_bn_relu, ("x", "w", "b", "g", "beta")),
    "mlp": (mlp, ("x", "w1", "b1", "w2", "b2")),
    "cross_entropy": (cross_entropy, ("logits",)),
}


def _inputs(name: str, size: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Host inputs: float32 values in float64 (a kernel's inputs), positive variances,
    class labels below the class count."""
    out: dict[str, np.ndarray] = {}
    for k, s in _shapes(name, size).items():
        if k == "labels":
            out[k] = rng.integers(0, _shapes(name, size)["logits"][1], s).astype(np.int64)
        elif k == "var":
            out[k] = (np.abs(rng.standard_normal(s)) + 0.5).astype(np.float32).astype(np.float64)
        else:
            scale = 1.0 / np.sqrt(s[-1]) if k.startswith("w") and len(s) > 1 else 1.0
            out[k] = (rng.standard_normal(s) * scale).astype(np.float32).astype(np.float64)
    return out


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _times(fn: Callable[[], Any], repeats: int, device: str) -> tuple[float, float, float]:
    """The best and the median of ``repeats`` timed runs (the best is what a busy
    machine's other work disturbs least), and the least process (CPU) time of a run:
    on a shared CPU what the run itself computed, whatever else the cores ran."""
    times, cpu = [], []
    for _ in range(repeats):
        _sync(device)
        t, c = time.perf_counter(), time.process_time()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(times), statistics.median(times), min(cpu)


def _row(name: str, size: str, backward: bool, device: str, repeats: int,
         rng: np.random.Generator) -> dict[str, Any]:
    from numoracle.oracle.precision import get_model  # noqa: PLC0415 - after torch's setup
    from numoracle.oracle.traced.op import TracedOp

    fn, grads = REFERENCES[name]
    host = _inputs(name, size, rng)
    examples = {k: torch.from_numpy(v) for k, v in host.items()}
    op = TracedOp(fn, inputs=examples, grads=grads if backward else (),
                  name=f"table_{name}_{size}_{int(backward)}")
    shapes = op.input_shapes({})
    for k, s in shapes.items():  # the cotangents of the outputs
        if k not in host:
            host[k] = rng.standard_normal(s).astype(np.float32).astype(np.float64)
    tensors = {k: torch.from_numpy(v).to(device) for k, v in host.items()}
    given = tensors if device.startswith("cuda") else host
    model = get_model("fp32")

    def oracle() -> Any:
        return op.reference(given, {}, model)

    def eager() -> Any:
        ins = {k: tensors[k].detach().requires_grad_(backward and k in grads)
               for k in op.ref.names}
        out = fn(*(ins[k] for k in op.ref.names))
        if backward:
            cot = tensors["grad_out"]
            return torch.autograd.grad(out, [ins[k] for k in grads], cot)
        return out

    _sync(device)
    t = time.perf_counter()
    oracle()  # the capture of this signature, and every first use
    _sync(device)
    first = time.perf_counter() - t
    eager()
    t_oracle, med_oracle, cpu_oracle = _times(oracle, repeats, device)
    t_eager, med_eager, cpu_eager = _times(eager, max(repeats, 7), device)
    return {"reference": name, "size": size, "pass": "fwd+bwd" if backward else "fwd",
            "shapes": {k: list(v) for k, v in _shapes(name, size).items()},
            "first_s": first, "oracle_s": t_oracle, "eager_s": t_eager,
            "oracle_median_s": med_oracle, "eager_median_s": med_eager,
            "ratio": t_oracle / t_eager if t_eager > 0 else float("inf"),
            "oracle_cpu_s": cpu_oracle, "eager_cpu_s": cpu_eager,
            "cpu_ratio": cpu_oracle / cpu_eager if cpu_eager > 0 else float("inf")}


def table(device: str, out: Path, repeats: int, budget: float,
          names: tuple[str, ...] = tuple(REFERENCES),
          sizes: tuple[str, ...] = ("realistic", "small")) -> int:
    """Measure every row, writing ``table.json`` and ``table.md`` to ``out`` after each."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for size in sizes:  # the sizes kernels run first, by default
        for name in names:
            for backward in (False, True):
                left = budget - (time.perf_counter() - start)
                if left <= 0:
                    rows.append({"reference": name, "size": size,
                                 "pass": "fwd+bwd" if backward else "fwd",
                                 "skipped": "the time budget ran out"})
                    continue
                try:
                    rows.append(_row(name, size, backward, device, repeats, rng))
                except Exception as exc:  # noqa: BLE001 - a row's failure is its result
                    rows.append({"reference": name, "size": size,
                                 "pass": "fwd+bwd" if backward else "fwd",
                                 "error": f"{type(exc).__name__}: {exc}"[:400]})
                print(rows[-1], flush=True)
                _write(out, device, repeats, rows)
    return 0


def _write(out: Path, device: str, repeats: int, rows: list[dict[str, Any]]) -> None:
    info = meta(sys.argv)
    write_json(out / "table.json", {"meta": info, "device": device, "repeats": repeats,
                                    "namespace": _namespace() if device.startswith("cuda")
                                    else "numpy", "rows": rows})
    where = device if not device.startswith("cuda") else f"{device}, {_namespace()}"
    lines = [f"# Traced oracle per case vs torch float64 eager ({where})", "",
             f"Command: `{info['command']}`; commit {info['commit']}, {info['date']}; "
             f"best of {repeats} oracle runs and of {max(repeats, 7)} eager runs (medians in "
             "table.json) after a warm-up that captures the graph (`first`); machine in "
             "table.json.", "",
             "Process (CPU) time: the least of the same runs (`cpu` columns).", "",
             "| reference | size | pass | oracle | torch fp64 eager | ratio | first "
             "| oracle cpu | eager cpu | cpu ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "oracle_s" in r:
            cpu = (f" {r['oracle_cpu_s'] * 1e3:.2f} ms | {r['eager_cpu_s'] * 1e3:.3f} ms | "
                   f"{r['cpu_ratio']:.1f}x |" if "oracle_cpu_s" in r else " | | |")
            lines.append(f"| {r['reference']} | {r['size']} | {r['pass']} | "
                         f"{r['oracle_s'] * 1e3:.2f} ms | {r['eager_s'] * 1e3:.3f} ms | "
                         f"{r['ratio']:.1f}x | {r['first_s']:.2f} s |" + cpu)
        else:
            lines.append(f"| {r['reference']} | {r['size']} | {r['pass']} | "
                         f"{r.get('error') or r.get('skipped')} | | | | | | |")
    write_text(out / "table.md", "\n".join(lines) + "\n")


def _namespace() -> str:
    """The name of the namespace the oracle evaluates in on a GPU."""
    from numoracle.oracle.xp import gpu_namespace, is_torch  # noqa: PLC0415 - after torch

    xp = gpu_namespace()
    return "torch" if is_torch(xp) else str(xp.__name__)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, or cuda (the oracle on the GPU)")
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=float, default=220.0, help="seconds for every row")
    p.add_argument("--only", default="", help="comma-separated reference names")
    p.add_argument("--sizes", default="realistic,small", help="comma-separated, in order")
    a = p.parse_args(argv)
    names = tuple(n for n in a.only.split(",") if n) or tuple(REFERENCES)
    sizes = tuple(s for s in a.sizes.split(",") if s)
    return table(a.device, Path(a.out), a.repeats, a.budget, names, sizes)


if __name__ == "__main__":
    raise SystemExit(main())
