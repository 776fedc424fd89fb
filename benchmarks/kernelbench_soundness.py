"""Soundness of the KernelBench judge: each problem's own ``Model`` as the candidate.

    python benchmarks/kernelbench_soundness.py PROBLEMS_DIR [--claims fp32,tf32,bf16]
        [--examples N] [--device cuda] [--shard I --shards N] [--out FILE.json]
    python benchmarks/kernelbench_soundness.py --merge FILE.json ... --md OUT.md

Every problem the traced oracle judges is judged with its own ``Model`` as the
candidate (a ``ModelNew`` subclassing it, nothing changed) under each claim: ``fp32``
runs torch with TF32 off, ``tf32`` with it allowed, ``bf16`` in bfloat16. A correct
candidate must pass every claim: any ``fail`` is a false alarm. Beside it, the time
the judge took for the official case (at reduced sizes where the official instance
does not fit the float64 oracle) and the time of one forward pass of the reference
at the official shape, in the claimed format and in float64, on the device.
Shards split the problems so that several processes share one GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

from benchmarks.kernelbench_mutants import BODIES, HEADER, _judged, _problem_files
from numoracle.kernelbench.judge import judge
from numoracle.kernelbench.problem import load_problem


class _TimeUp(BaseException):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TimeUp


def _judge_within(seconds: int, *args: object, **kwargs: object) -> object:
    """``judge(...)``, or None past ``seconds`` (an oracle too slow for a survey)."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return judge(*args, **kwargs)  # type: ignore[arg-type]
    except _TimeUp:
        return None
    finally:
        signal.alarm(0)


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


def run(args: argparse.Namespace) -> int:
    files = _problem_files(args.problems)[::args.every][args.shard::args.shards]
    claims = [c for c in args.claims.split(",") if c]
    rows: list[dict[str, object]] = []
    meta = {"command": "python benchmarks/kernelbench_soundness.py " + " ".join(sys.argv[1:]),
            "device": torch.cuda.get_device_name() if args.device != "cpu" else "CPU",
            "torch": torch.__version__, "host": platform.node()}
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            # written after every problem: a run stopped at its time limit keeps its rows
            args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
            name = f"{path.parent.name}/{path.stem}"
            if not _judged(path):
                rows.append({"problem": name, "status": "not judged"})
                continue
            cand = Path(tmp) / f"{path.stem}__model.py"
            cand.write_text(HEADER.format(path=str(path.resolve())) + BODIES["model"])
            row: dict[str, object] = {"problem": name}
            if args.timing:
                row["forward_fp32_s"] = _forward_seconds(path, torch.float32, args.device)
                row["forward_fp64_s"] = _forward_seconds(path, torch.float64, args.device)
            for claim in claims:
                j = _judge_within(args.limit_seconds, path, cand, precision=claim,
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
                              "reduced": any("official instance" in n for n in j.notes)}
                print(f"{name} {claim}: {j.status} {j.cases} cases {j.seconds:.1f}s "
                      f"{j.reason[:90]}", file=sys.stderr, flush=True)
            rows.append(row)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


def merge(paths: list[Path], md: Path) -> int:
    rows, metas = [], []
    for p in paths:
        d = json.loads(p.read_text())
        rows += d["rows"]
        metas.append(d["meta"])
    rows.sort(key=lambda r: (r["problem"].split("/")[0],
                             int(r["problem"].split("/")[1].split("_")[0])))
    claims = [c for c in ("fp32", "tf32", "bf16") if any(c in r for r in rows)]
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
        off = r.get(claims[0], {}).get("official_s")
        red = " (reduced)" if r.get(claims[0], {}).get("reduced") else ""
        lines.append(f"| {r['problem']} | " + " | ".join(cells) + f" | {sec(off)}{red} | "
                     f"{sec(r.get('forward_fp32_s'))} | {sec(r.get('forward_fp64_s'))} |")
    md.write_text("\n".join(lines) + "\n")
    md.with_suffix(".json").write_text(json.dumps({"meta": metas, "rows": rows}, indent=1)
                                       + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", type=Path, nargs="?")
    parser.add_argument("--claims", default="fp32,tf32,bf16")
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--every", type=int, default=1, help="take every N-th problem file")
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--limit-seconds", type=int, default=90,
                        help="a judgement taking longer is recorded as a timeout")
    parser.add_argument("--timing", action="store_true",
                        help="also time one forward pass at the official shape")
    parser.add_argument("--out", type=Path, default=Path("soundness.json"))
    parser.add_argument("--merge", type=Path, nargs="+", default=None)
    parser.add_argument("--md", type=Path, default=Path("soundness.md"))
    args = parser.parse_args()
    if args.merge:
        return merge(args.merge, args.md)
    if args.problems is None:
        parser.error("give PROBLEMS_DIR, or --merge FILES")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
