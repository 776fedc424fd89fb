"""The ATen operations of the traced oracle's recorded evaluations, per reference, and
the code that makes them.

Per reference of :mod:`benchmarks.traced.table` (forward, and forward + backward):
the case's evaluation in torch's namespace recorded
(:func:`numoracle.oracle.traced.recording.record`, on the CPU unless ``--device``
says otherwise) with each node's Python stack, and counted: the graph's ATen
operations, its guards, and the operations whose result has as many elements as the
largest input (full-size arrays, each a pass over memory); then the operations
grouped by the rule that made them (the innermost frame of
``numoracle/oracle/traced/library``), by the arithmetic that made them (the innermost
frame of the package outside the namespace, :mod:`numoracle.oracle.xp`) and by ATen
op. ``--time`` adds the replay's time on the recorded case (the best of ``--repeats``
runs, and the least process time of a run: on a shared CPU what the run itself computed).
Rows go to ``graph_ops.json`` under ``--out`` and a table to stdout.

    python -m benchmarks.traced.graph_ops [--size realistic] [--names softmax,...]
        [--passes fwd,fwd+bwd] [--top 12] [--time] [--out DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import re
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_json
from benchmarks.traced.table import REFERENCES, _inputs

__all__ = ["count", "main"]

#: a frame of a recorded stack trace: file, line, function
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
#: the package's modules that only forward to torch (a frame there names no arithmetic)
_PLUMBING = ("oracle/xp.py", "oracle/traced/recording.py")


@contextlib.contextmanager
def _package_frames() -> Iterator[None]:
    """While recording: a node's stack trace keeps the package's frames (the tracer's
    own filter keeps only the frames of modules' ``forward``)."""
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer  # noqa: PLC0415

    def keep(self: Any, summary: traceback.StackSummary) -> traceback.StackSummary:
        return traceback.StackSummary.from_list(
            [f for f in summary if "numoracle/" in f.filename and "/benchmarks/" not in f.filename])

    before = PythonKeyTracer.__dict__.get("_filter_traceback_frames")
    PythonKeyTracer._filter_traceback_frames = keep  # type: ignore[method-assign]
    try:
        yield
    finally:
        if before is None:
            del PythonKeyTracer._filter_traceback_frames
        else:
            PythonKeyTracer._filter_traceback_frames = before  # type: ignore[method-assign]


def _frames(trace: str) -> list[tuple[str, int, str]]:
    """The package's frames of a stack trace, outermost first, as
    (path below ``numoracle/``, line, function)."""
    out = []
    for path, line, fn in _FRAME.findall(trace or ""):
        if "numoracle/" in path and "/benchmarks/" not in path:
            out.append((path.rsplit("numoracle/", 1)[-1], int(line), fn))
    return out


def _where(trace: str) -> tuple[str, str]:
    """The rule (innermost frame in the rule library) and the arithmetic (innermost
    frame outside the namespace's plumbing) that made a node."""
    frames = _frames(trace)
    rules = [f for f in frames if f[0].startswith("oracle/traced/library/")]
    rule = f"{rules[-1][0].rsplit('/', 1)[-1]}:{rules[-1][2]}" if rules else "(outside rules)"
    own = [f for f in frames if not f[0].endswith(_PLUMBING)]
    prim = f"{own[-1][0].rsplit('/', 1)[-1]}:{own[-1][2]}:{own[-1][1]}" if own else "(none)"
    return rule, prim


def _numel(node: torch.fx.Node) -> int:
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return v.numel()
    if isinstance(v, (tuple, list)):
        return max((t.numel() for t in v if isinstance(t, torch.Tensor)), default=0)
    return 0


def count(name: str, size: str, backward: bool, device: str = "cpu", repeats: int = 0
          ) -> dict[str, Any]:
    """The recorded graph of reference ``name`` (at ``size``, with its gradients where
    ``backward``) counted; ``repeats`` > 0: its replay timed too (best of that many)."""
    from numoracle.oracle.precision import get_model  # noqa: PLC0415 - after torch
    from numoracle.oracle.traced.capture import capture  # noqa: PLC0415
    from numoracle.oracle.traced.interpret import evaluate  # noqa: PLC0415
    from numoracle.oracle.traced.op import TracedOp  # noqa: PLC0415
    from numoracle.oracle.traced.recording import record  # noqa: PLC0415
    from numoracle.oracle.xp import namespace_named  # noqa: PLC0415

    fn, grads = REFERENCES[name]
    host = _inputs(name, size, np.random.default_rng(1))
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in host.items()},
                  grads=grads if backward else (), name=f"graph_ops_{name}_{size}_{int(backward)}")
    rng = np.random.default_rng(11)
    for k, s in op.input_shapes({}).items():
        if k not in host:
            host[k] = rng.standard_normal(s).astype(np.float32).astype(np.float64)
    integers = op.integer_inputs({})
    tx = namespace_named("torch")
    dev = torch.device(device)
    ctx = replace(op.context(get_model("fp32")), xp=tx, device=dev)
    case = {k: (v if k in integers else torch.from_numpy(v).to(dev)) for k, v in host.items()}
    seen = {k: torch.from_numpy(v).to(dev) for k, v in host.items()}
    graph = capture(op.ref, {n: seen[n] for n in op.ref.names},
                    {f"grad_{o}": seen[f"grad_{o}"] for o in op._graded({})})
    fixed = {k: v for k, v in case.items() if k in integers}
    floats = {k: v for k, v in case.items() if k not in integers}
    with _package_frames():
        rec = record(lambda fl: evaluate(graph, {**fixed, **fl}, ctx), floats, tx,
                     stack_traces=True)
    full = max(v.numel() for v in floats.values())
    nodes = [n for n in rec.module.graph.nodes if n.op == "call_function"]
    by_rule: collections.Counter[str] = collections.Counter()
    by_prim: collections.Counter[str] = collections.Counter()
    by_aten: collections.Counter[str] = collections.Counter()
    big = 0
    for n in nodes:
        rule, prim = _where(n.meta.get("stack_trace", ""))
        by_rule[rule] += 1
        by_prim[prim] += 1
        by_aten[str(n.target).removeprefix("aten.")] += 1
        big += _numel(n) >= full
    row: dict[str, Any] = {"reference": name, "size": size,
                           "pass": "fwd+bwd" if backward else "fwd", "ops": len(nodes),
                           "full_size": big, "guards": len(rec.sources),
                           "graph_ops": [str(n.target) for n in graph.module.graph.nodes
                                         if n.op == "call_function"],
                           "by_rule": dict(by_rule.most_common()),
                           "by_arithmetic": dict(by_prim.most_common()),
                           "by_aten": dict(by_aten.most_common())}
    if repeats > 0:
        rec.run(floats)
        best, least = math.inf, math.inf
        for _ in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            got = rec.run(floats)
            best = min(best, time.perf_counter() - t)
            least = min(least, time.process_time() - c)
            if got is None:
                raise AssertionError(f"{name}: the replay of the recorded case was refused "
                                     f"({rec.failed_sources})")
        row["replay_s"], row["replay_cpu_s"] = best, least
    return row


def _show(row: dict[str, Any], top: int) -> str:
    lines = [f"{row['reference']} {row['pass']} ({row['size']}): {row['ops']} ops, "
             f"{row['full_size']} full-size, {row['guards']} guards"
             + (f", replay {row['replay_s'] * 1e3:.1f} ms" if "replay_s" in row else "")
             + f"; reference graph: {', '.join(row['graph_ops'])}"]
    for key in ("by_rule", "by_arithmetic", "by_aten"):
        items = list(row[key].items())[:top]
        lines.append(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in items))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", default="realistic", choices=("small", "realistic"))
    p.add_argument("--names", default=",".join(REFERENCES))
    p.add_argument("--passes", default="fwd,fwd+bwd")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--time", action="store_true", help="time the replay too")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    rows = []
    for name in a.names.split(","):
        for ps in a.passes.split(","):
            row = count(name, a.size, ps == "fwd+bwd", a.device, a.repeats if a.time else 0)
            rows.append(row)
            print(_show(row, a.top), flush=True)
    print("\n| reference | pass | ops | full-size | guards |"
          + (" replay | replay (process time) |" if a.time else ""))
    print("|---|---|---|---|---|" + ("---|---|" if a.time else ""))
    for r in rows:
        print(f"| {r['reference']} | {r['pass']} | {r['ops']} | {r['full_size']} | "
              f"{r['guards']} |" + (f" {r['replay_s'] * 1e3:.1f} ms | "
                                    f"{r['replay_cpu_s'] * 1e3:.1f} ms |" if a.time else ""))
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        write_json(a.out / "graph_ops.json",
                   {"meta": meta(sys.argv if argv is None else argv), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
