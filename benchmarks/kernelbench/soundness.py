"""Soundness of the KernelBench judge: each problem's own ``Model`` as the candidate.

Every problem the traced oracle judges is judged with its own ``Model`` as the
candidate (a ``ModelNew`` subclassing it, nothing changed) under each claim:
``fp32`` runs torch with TF32 off, ``tf32`` with it allowed, ``bf16`` in
bfloat16. A correct candidate must pass every claim: any ``fail`` is a false
alarm. Beside it (``--timing``), one forward pass of the reference at the
official shape, in float32 and in float64, on the device, and the time the
judge took for its official case (at reduced sizes where the official instance
does not fit the float64 oracle).

A shard writes its rows after every problem (``soundness_shard{i}.json``);
:func:`merge` pools shard files into ``soundness.md`` and ``soundness.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from benchmarks.kernelbench.candidates import (
    is_judged,
    judge_within,
    official_how,
    problem_files,
    problem_name,
    write_candidate,
)
from benchmarks.record import meta
from numoracle.kernelbench.problem import load_problem

__all__ = ["CLAIMS", "merge", "run_shard"]

#: the claims a problem's own Model is judged under, in table order
CLAIMS = ("fp32", "tf32", "bf16")


def _forward_seconds(path: Path, dtype: torch.dtype, device: str) -> float | str:
    """One forward pass of ``Model`` at the official shape (best of two), or why not."""
    try:
        problem = load_problem(path)
        base = problem.dropout_off()
        with torch.device(device):
            model = problem.model(base).to(dtype)
            args = [a.to(device=device, dtype=dtype) if isinstance(a, torch.Tensor)
                    and a.is_floating_point() else a.to(device) if isinstance(a, torch.Tensor)
                    else a for a in problem.inputs(base)]
        best = float("inf")
        with torch.no_grad():
            for _ in range(2):
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(*args)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                best = min(best, time.perf_counter() - t0)
        del model, args
        return best
    except Exception as exc:  # noqa: BLE001 - out of memory at the official shape is a finding
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
    finally:
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def run_shard(args: argparse.Namespace, out: Path) -> None:
    """Judge this shard's problems (``args.shard`` of ``args.shards``) under every claim
    of ``args.claims``, writing the rows to ``out`` after each problem."""
    files = problem_files(args.problems)[::args.every][args.shard::args.shards]
    claims = [c for c in args.claims.split(",") if c]
    rows: list[dict[str, Any]] = []
    head = meta(args.argv, device=torch.cuda.get_device_name()
                if args.device != "cpu" else "CPU")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            # written before every problem: a run stopped at its time limit keeps its rows
            out.write_text(json.dumps({"meta": head, "rows": rows}, indent=1) + "\n")
            name = problem_name(path)
            if not is_judged(path):
                rows.append({"problem": name, "status": "not judged"})
                continue
            cand = write_candidate(Path(tmp), path, "model")
            row: dict[str, Any] = {"problem": name}
            if args.timing:
                row["forward_fp32_s"] = _forward_seconds(path, torch.float32, args.device)
                row["forward_fp64_s"] = _forward_seconds(path, torch.float64, args.device)
            for claim in claims:
                j = judge_within(args.limit_seconds, path, cand, precision=claim,
                                 examples=args.examples, device=args.device, isolated=False)
                if j is None:
                    row[claim] = {"status": "timeout", "reason": f"over {args.limit_seconds} s"}
                    print(f"{name} {claim}: timeout", file=sys.stderr, flush=True)
                    continue
                row[claim] = {"status": j.status, "reason": j.reason[:200], "cases": j.cases,
                              "worst_ratio": j.worst_ratio, "kernelbench": j.kernelbench,
                              "seconds": round(j.seconds, 3),
                              "official_s": round(j.official.seconds, 3)
                              if j.official is not None else None,
                              "official": official_how(j)}
                print(f"{name} {claim}: {j.status} {j.cases} cases {j.seconds:.1f}s "
                      f"{j.reason[:90]}", file=sys.stderr, flush=True)
            rows.append(row)
    out.write_text(json.dumps({"meta": head, "rows": rows}, indent=1) + "\n")


def _order(row: dict[str, Any]) -> tuple[str, int]:
    level, stem = row["problem"].split("/", 1)
    head = stem.split("_", 1)[0]
    return (level, int(head) if head.isdigit() else 0)


def merge(paths: list[Path], out: Path) -> Path:
    """Pool shard files into ``out/soundness.md`` and ``out/soundness.json``; returns the
    markdown's path."""
    rows: list[dict[str, Any]] = []
    metas = []
    for p in paths:
        d = json.loads(p.read_text())
        rows += d["rows"]
        metas += d["meta"] if isinstance(d["meta"], list) else [d["meta"]]
    rows.sort(key=_order)
    claims = [c for c in CLAIMS if any(c in r for r in rows)]
    lines = ["# KernelBench: each problem's own Model as the candidate (false alarms)", "",
             f"Commands: {'; '.join(sorted({m['command'] for m in metas}))}  ",
             f"Device: {metas[0]['device']}, torch {metas[0]['torch']}.", "",
             "| claim | judged | pass | fail (false alarm) | abstain/refused | over the time "
             "limit |", "|---|---|---|---|---|---|"]
    for c in claims:
        st = Counter(r[c]["status"] for r in rows if c in r)
        lines.append(f"| {c} | {sum(st.values()) - st.get('timeout', 0)} | {st.get('pass', 0)} "
                     f"| {st.get('fail', 0)} | {st.get('abstain', 0) + st.get('refused', 0)} "
                     f"| {st.get('timeout', 0)} |")
    lines += ["", f"Not judged (a missing rule or no valid size): "
              f"{sum(1 for r in rows if r.get('status') == 'not judged')}.", "",
              "## Every problem", "",
              "| problem | " + " | ".join(claims) + " | judge's official case s | "
              "forward fp32 s | forward fp64 s |", "|---" * (len(claims) + 4) + "|"]

    def sec(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v or "-")[:30]

    for r in rows:
        if r.get("status") == "not judged":
            continue
        cells = []
        for c in claims:
            v = r.get(c, {})
            text = v.get("status", "-")
            if v.get("status") not in ("pass", None):
                text += ": " + v.get("reason", "")[:80].replace("|", "/")
            cells.append(text)
        first = r.get(claims[0], {}) if claims else {}
        how = first.get("official") or ("reduced" if first.get("reduced") else "whole")
        red = "" if how == "whole" else f" ({how})"
        lines.append(f"| {r['problem']} | " + " | ".join(cells) + f" | "
                     f"{sec(first.get('official_s'))}{red} | "
                     f"{sec(r.get('forward_fp32_s'))} | {sec(r.get('forward_fp64_s'))} |")
    out.mkdir(parents=True, exist_ok=True)
    md = out / "soundness.md"
    md.write_text("\n".join(lines) + "\n")
    (out / "soundness.json").write_text(json.dumps({"meta": metas, "rows": rows}, indent=1)
                                        + "\n")
    return md

