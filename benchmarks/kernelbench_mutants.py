"""Mutants of KernelBench problems: numoracle's verdict beside KernelBench's 1e-2 and 1e-4.

    python benchmarks/kernelbench_mutants.py PROBLEMS_DIR [--limit N] [--examples N]
        [--device cpu|cuda] [--precision fp32] [--out DIR] [--isolate]

For every problem the traced oracle judges (no missing rule), each mutant below is
written as a KernelBench candidate file (``ModelNew`` subclassing the problem's own
``Model``) and judged with :func:`numoracle.kernelbench.judge.judge`. The problem's
own ``Model`` as the candidate (``model``) must pass: a failure there is a false
alarm. KernelBench's columns apply its rule (``torch.allclose(atol=rtol=tol)``
against torch's own output) to the official case the judge ran (at reduced sizes
where the official instance does not fit the float64 oracle: said per row).

Mutants: ``zeros``; ``constant`` (the output's mean everywhere); ``bf16`` (the
whole model run in bfloat16, handed back as float32, claimed fp32); ``strides``
(every input read as if contiguous); ``tail`` (assumes the output's element count
is a multiple of 256: the rest left at zero, a shape-specialised kernel);
``mutates`` (scales its first input in place after computing); ``reuse`` (returns
the result cached per input address).
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
from typing import Any

import torch

from numoracle.kernelbench.cases import reduced_sizes
from numoracle.kernelbench.judge import judge, missing_rules
from numoracle.kernelbench.problem import BadFile, load_problem


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

HEADER = '''import copy
import importlib.util

import torch

_spec = importlib.util.spec_from_file_location("_problem", {path!r})
_problem = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_problem)


def _contiguous_view(t):
    if not isinstance(t, torch.Tensor) or t.is_contiguous():
        return t
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride())


class ModelNew(_problem.Model):
'''

BODIES = {
    "model": "    pass\n",
    "zeros": "    def forward(self, *args):\n"
             "        return torch.zeros_like(super().forward(*args))\n",
    "constant": "    def forward(self, *args):\n"
                "        out = super().forward(*args)\n"
                "        return torch.full_like(out, out.float().mean().item())\n",
    "bf16": "    def forward(self, *args):\n"
            "        if '_low' not in self.__dict__:\n"
            "            self.__dict__['_low'] = copy.deepcopy(self).bfloat16()\n"
            "        low = [a.bfloat16() if isinstance(a, torch.Tensor) and a.is_floating_point()\n"
            "               else a for a in args]\n"
            "        return _problem.Model.forward(self.__dict__['_low'], *low).float()\n",
    "strides": "    def forward(self, *args):\n"
               "        return super().forward(*[_contiguous_view(a) for a in args])\n",
    "tail": "    def forward(self, *args):\n"
            "        out = super().forward(*args).contiguous()\n"
            "        n = out.numel()\n"
            "        out.view(-1)[n - n % 256:] = 0\n"
            "        return out\n",
    "mutates": "    def forward(self, *args):\n"
               "        out = super().forward(*args)\n"
               "        for a in args:\n"
               "            if isinstance(a, torch.Tensor) and a.is_floating_point():\n"
               "                a.mul_(0.5)\n"
               "                break\n"
               "        return out\n",
    "reuse": "    def forward(self, *args):\n"
             "        cache = self.__dict__.setdefault('_cache', {})\n"
             "        key = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a\n"
             "                    for a in args)\n"
             "        if key not in cache:\n"
             "            cache[key] = super().forward(*args)\n"
             "        return cache[key]\n",
}


def _problem_files(root: Path) -> list[Path]:
    levels = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("level"))
    folders = levels or [root]

    def key(p: Path) -> tuple[str, int, str]:
        head = p.stem.split("_", 1)[0]
        return (p.parent.name, int(head) if head.isdigit() else 0, p.stem)

    return sorted((f for d in folders for f in d.glob("*.py")), key=key)


def _judged(path: Path) -> bool:
    try:
        problem = load_problem(path)
        base = problem.dropout_off()
        small = reduced_sizes(problem, base)
        if small is None:
            return False
        return not missing_rules(problem, {**base, **small})
    except (BadFile, Exception):  # noqa: BLE001 - a problem that cannot be traced is skipped
        return False


def write(rows: list[dict[str, Any]], metas: list[dict[str, Any]], out: Path) -> None:
    """``mutants.json`` and ``mutants.md`` in ``out`` from the rows of one or more runs."""
    meta = metas[0]
    problems = sorted({r["problem"] for r in rows})
    mutants = list(dict.fromkeys(r["mutant"] for r in rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps({"meta": metas, "rows": rows}, indent=1)
                                      + "\n")
    lines = ["# KernelBench mutants: numoracle beside KernelBench's own rule", "",
             "Commands: " + "; ".join(f"`{m['command']}`" for m in metas) + "  ",
             f"Machine: {meta['machine']}; torch {meta['torch']}; "
             f"{max(m['seconds'] for m in metas)} s (the longest run); "
             f"{len(problems)} problems (those the traced oracle judges), precision "
             f"{meta['precision']}, {meta['examples']} drawn cases per candidate after the "
             "official one.", "",
             "Per mutant: how many candidates each judge lets through (`pass`). numoracle's "
             "`pass` on `model` is a correct candidate passing; on any other mutant a miss. "
             "KernelBench's columns are its rule on the official case (reduced sizes where "
             "the float64 oracle cannot hold the official instance).", "",
             "| mutant | judged | numoracle pass | numoracle fail | abstain/refused | "
             "KB 1e-2 pass | KB 1e-4 pass | failing outside the official case |",
             "|---|---|---|---|---|---|---|---|"]
    for mutant in mutants:
        rs = [r for r in rows if r["mutant"] == mutant]
        c = Counter(r["status"] for r in rs)
        kb2 = sum(1 for r in rs if r["kernelbench"].get("0.01"))
        kb4 = sum(1 for r in rs if r["kernelbench"].get("0.0001"))
        outside = sum(1 for r in rs if r["status"] == "fail" and not r.get("failing_official"))
        lines.append(f"| {mutant} | {len(rs) - c.get('timeout', 0)} | {c.get('pass', 0)} | "
                     f"{c.get('fail', 0)} | {c.get('abstain', 0) + c.get('refused', 0)} "
                     f"(+{c.get('timeout', 0)} over the time limit) | {kb2} | {kb4} | "
                     f"{outside} |")
    lines += ["", "## Every candidate", "",
              "| problem | mutant | numoracle | KB 1e-2 | KB 1e-4 | cases | why |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        kb = r["kernelbench"]
        lines.append(f"| {r['problem']} | {r['mutant']} | {r['status']} | "
                     f"{'pass' if kb.get('0.01') else 'fail'} | "
                     f"{'pass' if kb.get('0.0001') else 'fail'} | {r['cases']} | "
                     f"{r['reason'][:140].replace('|', '/')} |")
    (out / "mutants.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", type=Path, nargs="?")
    parser.add_argument("--limit", type=int, default=40, help="problems at most (default 40)")
    parser.add_argument("--every", type=int, default=1,
                        help="take every N-th problem file (a spread over both levels)")
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--isolate", action="store_true",
                        help="a process per candidate (default: in-process, faster)")
    parser.add_argument("--mutants", default=",".join(BODIES))
    parser.add_argument("--limit-seconds", type=int, default=120,
                        help="a judgement taking longer is recorded as a timeout")
    parser.add_argument("--no-shrink", action="store_true",
                        help="report the first failing drawn case, unshrunk (faster)")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="write mutants.md and .json to --out from shard files")
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/kernelbench"))
    args = parser.parse_args()
    if args.merge:
        shards = [json.loads(p.read_text()) for p in args.merge]
        write([r for d in shards for r in d["rows"]], [d["meta"] for d in shards], args.out)
        return 0
    if args.problems is None:
        parser.error("give PROBLEMS_DIR, or --merge FILES")
    mutants = [m for m in args.mutants.split(",") if m]
    t0 = time.perf_counter()
    chosen = [p for p in _problem_files(args.problems)[::args.every] if _judged(p)][: args.limit]
    chosen = chosen[args.shard::args.shards]
    rows: list[dict[str, Any]] = []
    meta_base = {"command": "python benchmarks/kernelbench_mutants.py " + " ".join(sys.argv[1:]),
                 "machine": f"{platform.machine()} {platform.system()}, "
                 f"{torch.cuda.get_device_name() if args.device != 'cpu' else 'CPU only'}",
                 "torch": torch.__version__, "problems": len(chosen), "mutants": mutants,
                 "precision": args.precision, "examples": args.examples}
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in chosen:
            for mutant in mutants:
                cand = Path(tmp) / f"{path.stem}__{mutant}.py"
                cand.write_text(HEADER.format(path=str(path.resolve())) + BODIES[mutant])
                j = _judge_within(args.limit_seconds, path, cand, precision=args.precision,
                                  examples=args.examples, device=args.device,
                                  isolated=args.isolate, shrink=not args.no_shrink)
                if j is None:
                    print(f"{path.stem} {mutant}: timeout", file=sys.stderr, flush=True)
                    rows.append({"problem": f"{path.parent.name}/{path.stem}",
                                 "mutant": mutant, "status": "timeout", "kernelbench": {},
                                 "cases": 0, "reason": f"over {args.limit_seconds} s"})
                    continue
                row = j.as_dict()
                row.update(problem=f"{path.parent.name}/{path.stem}", mutant=mutant,
                           candidate=mutant,
                           official_reduced=any("official instance" in n for n in j.notes))
                rows.append(row)
                if args.shards > 1:  # kept row by row: a run stopped at its limit keeps its rows
                    partial = {**meta_base, "seconds": round(time.perf_counter() - t0, 1)}
                    (args.out / f"mutants_shard{args.shard}.json").write_text(
                        json.dumps({"meta": partial, "rows": rows}, indent=1) + "\n")
                print(f"{row['problem']} {mutant}: {j.status} KB {j.kernelbench} "
                      f"{j.seconds:.1f}s {j.reason[:100]}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    meta = {**meta_base, "seconds": round(seconds, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    if args.shards > 1:
        (args.out / f"mutants_shard{args.shard}.json").write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    else:
        write(rows, [meta], args.out)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
