"""Where the traced oracle's time per case goes: one row of :mod:`benchmarks.traced.table`
under cProfile.

For each ``--rows`` entry (``name:size:pass``, pass ``fwd`` or ``bwd``) the case is
captured and evaluated once (warm-up), then evaluated once more under cProfile; the
functions with the most time of their own are written to ``profile.txt``, with the
row's process (CPU) time and wall time, and on CUDA the number of host-device
synchronisations of the profiled evaluation (torch's sync debug mode counts them).

    python -m benchmarks.traced.profile --device cuda --out DIR \\
        --rows softmax:small:fwd,softmax:realistic:bwd
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_text
from benchmarks.traced.table import REFERENCES, _inputs, _namespace

__all__ = ["profile_row", "main"]


def _case(name: str, size: str, backward: bool, device: str) -> tuple[Any, dict[str, Any]]:
    """The table's op and inputs for one row (as :func:`benchmarks.traced.table._row`)."""
    from numoracle.oracle.traced.op import TracedOp  # noqa: PLC0415 - after torch's setup

    rng = np.random.default_rng(0)
    fn, grads = REFERENCES[name]
    host = _inputs(name, size, rng)
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in host.items()},
                  grads=grads if backward else (), name=f"profile_{name}_{size}_{int(backward)}")
    for k, s in op.input_shapes({}).items():
        if k not in host:
            host[k] = rng.standard_normal(s).astype(np.float32).astype(np.float64)
    if device.startswith("cuda"):
        return op, {k: torch.from_numpy(v).to(device) for k, v in host.items()}
    return op, host


def _syncs(fn: Any, device: str) -> int | None:
    """How many times ``fn`` synchronises the host with the device (CUDA only; torch's
    synchronisations: in CuPy's namespace only those of the tensors the capture and
    the hand-back touch, so run with ``NUMORACLE_GPU_NAMESPACE=torch`` to count the
    rules')."""
    if not device.startswith("cuda"):
        return None
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def profile_row(spec: str, device: str, top: int) -> str:
    """The report of one row: times, synchronisations and the top functions."""
    from numoracle.oracle.precision import get_model  # noqa: PLC0415

    name, size, pass_ = spec.split(":")
    op, given = _case(name, size, pass_ == "bwd", device)
    model = get_model("fp32")

    def once() -> Any:
        out = op.reference(given, {}, model)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    once()  # capture and first use
    wall, cpu = time.perf_counter(), time.process_time()
    once()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    syncs = _syncs(once, device)
    counted = "" if syncs is None else (
        f", {syncs} host-device synchronisations" if _namespace() != "cupy" else
        f", {syncs} of torch's synchronisations (CuPy's own reads not counted)")
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    where = device if not device.startswith("cuda") else f"{device} ({_namespace()})"
    head = (f"## {spec} on {where}: wall {wall * 1e3:.1f} ms, process time {cpu * 1e3:.1f} ms"
            f"{counted}")
    return head + "\n\n```\n" + buf.getvalue().strip() + "\n```\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, or cuda (the oracle on the GPU)")
    p.add_argument("--out", required=True)
    p.add_argument("--rows", default="softmax:small:fwd,softmax:realistic:bwd")
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args(argv)
    info = meta(sys.argv)
    parts = [f"# Traced oracle profile ({a.device})", "",
             f"Command: `{info['command']}`; commit {info['commit']}, {info['date']}.", ""]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for spec in a.rows.split(","):
        try:
            parts.append(profile_row(spec, a.device, a.top))
        except Exception as exc:  # noqa: BLE001 - a row's failure is its result
            parts.append(f"## {spec}: {type(exc).__name__}: {exc}"[:400] + "\n")
        write_text(out / "profile.md", "\n".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
