"""Where a traced reference's time goes node by node on a GPU, with the softmax family's
device kernels on and off in one process.

For each ``--rows`` entry (``name:size:pass`` of :mod:`benchmarks.traced.table`, pass
``fwd`` or ``bwd``) the case is evaluated with ``NUMORACLE_DEVICE_ROWS`` 1 and 0 in
turn, ``--repeats`` times each after a warm-up of each: the whole case as it runs (two
processes, one per switch, may differ by more than the switch does: the host's speed
varies from process to process), then every node's rule timed alone: the host's time
until the rule returns, then the wait for the device to finish what it queued (a
synchronisation after each node, so that a node's device work is not counted in the
next). Per node the least of the runs; written to ``node_times.md`` and
``node_times.json``.

    python -m benchmarks.traced.node_times --out DIR --rows attention:realistic:bwd
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.record import meta, write_json, write_text
from benchmarks.traced.profile import _case

__all__ = ["node_times", "main"]


class _Timer:
    """The rules of every graph wrapped: each node's host and device seconds of one run."""

    def __init__(self, sync: Any) -> None:
        self.sync = sync
        self.host: dict[str, float] = defaultdict(float)
        self.wait: dict[str, float] = defaultdict(float)

    def wrap(self, rules: dict[Any, Any]) -> dict[Any, Any]:
        return {node: self._timed(f"{node.name} ({node.target})", fn)
                for node, fn in rules.items()}

    def _timed(self, key: str, fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            back = time.perf_counter()
            self.sync()
            self.host[key] += back - start
            self.wait[key] += time.perf_counter() - back
            return out
        return run


def node_times(spec: str, repeats: int, device: str = "cuda") -> dict[str, Any]:
    """Per node and switch: the least host and wait seconds over ``repeats`` runs (on
    ``cpu`` the switch changes nothing: a check of the harness)."""
    import torch  # noqa: PLC0415 - a GPU's

    from numoracle.oracle.fused import DEVICE_ROWS_VARIABLE  # noqa: PLC0415
    from numoracle.oracle.precision import get_model  # noqa: PLC0415
    from numoracle.oracle.traced import interpret  # noqa: PLC0415

    name, size, pass_ = spec.split(":")
    op, given = _case(name, size, pass_ == "bwd", device)
    model = get_model("fp32")
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    timer = _Timer(sync)
    plain = interpret.rules_of
    best: dict[str, dict[str, tuple[float, float]]] = {"1": {}, "0": {}}
    totals: dict[str, float] = {}
    plain_totals: dict[str, float] = {}
    saved = os.environ.get(DEVICE_ROWS_VARIABLE)

    def timed(switch: str, least: dict[str, float]) -> None:
        """One evaluation with the kernels ``switch``ed, its seconds kept where least."""
        os.environ[DEVICE_ROWS_VARIABLE] = switch
        timer.host.clear()
        timer.wait.clear()
        sync()
        start = time.perf_counter()
        op.reference(given, {}, model)
        sync()
        whole = time.perf_counter() - start
        least[switch] = min(least.get(switch, whole), whole)
    try:
        for switch in ("1", "0"):  # warm-ups: each switch's kernels compiled, pools filled
            timed(switch, {})
        for _ in range(repeats):  # the whole case, the switches in turn in one process
            for switch in ("1", "0"):
                timed(switch, plain_totals)
        interpret.rules_of = lambda graph: timer.wrap(plain(graph))
        for _ in range(repeats):
            for switch in ("1", "0"):
                timed(switch, totals)
                for key in timer.host:
                    h, w = timer.host[key], timer.wait[key]
                    old = best[switch].get(key)
                    best[switch][key] = (h, w) if old is None or h + w < sum(old) else old
    finally:
        interpret.rules_of = plain
        if saved is None:
            os.environ.pop(DEVICE_ROWS_VARIABLE, None)
        else:
            os.environ[DEVICE_ROWS_VARIABLE] = saved
    return {"row": spec, "repeats": repeats, "total_s": totals, "plain_s": plain_totals,
            "nodes": {k: {"on": best["1"].get(k), "off": best["0"].get(k)}
                      for k in best["1"]}}


def _report(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = ["# The traced oracle node by node on a GPU, the softmax family's kernels on and off",
             "", f"Command: `{info['command']}`; commit {info['commit']}, {info['date']}; "
             "per node the least of the runs (host: until the rule returns; wait: the "
             "synchronisation after it). Nodes of 0.05 ms or more.", ""]
    for r in rows:
        tot, whole = r["total_s"], r["plain_s"]
        lines += [f"## {r['row']}", "",
                  f"The whole case, the switch alternated in one process: "
                  f"**{whole['1'] * 1e3:.2f} ms on, {whole['0'] * 1e3:.2f} ms off**; "
                  f"synchronised after every node: {tot['1'] * 1e3:.2f} ms on, "
                  f"{tot['0'] * 1e3:.2f} ms off.", "",
                  "| node | on host | on wait | off host | off wait | on - off |",
                  "|---|---|---|---|---|---|"]
        for key, v in sorted(r["nodes"].items(),
                             key=lambda kv: -sum(kv[1]["on"] or (0, 0))):
            on, off = v["on"] or (0.0, 0.0), v["off"] or (0.0, 0.0)
            if max(sum(on), sum(off)) < 5e-5:
                continue
            lines.append(f"| {key} | {on[0] * 1e3:.2f} | {on[1] * 1e3:.2f} | {off[0] * 1e3:.2f} "
                         f"| {off[1] * 1e3:.2f} | {(sum(on) - sum(off)) * 1e3:+.2f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--rows", default="attention:realistic:bwd")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    info = meta(sys.argv)
    rows = []
    for spec in a.rows.split(","):
        rows.append(node_times(spec, a.repeats, a.device))
        write_json(out / "node_times.json", {"meta": info, "rows": rows})
        write_text(out / "node_times.md", _report(rows, info))
    print(_report(rows, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
