"""Check the Triton examples against their PyTorch references on a CUDA GPU.

    python examples/triton/check_triton.py NAME [--precision triton|ieee] [--cases N]
        [--chunk K] [--out DIR]
    python examples/triton/check_triton.py --table DIR
    TRITON_INTERPRET=1 python examples/triton/check_triton.py NAME --backend torch-cpu

A ``"triton"`` target claims fp32 under Triton's default elementwise accuracy
(``fp32+triton``); ``--precision ieee`` claims correctly rounded arithmetic
instead (the model given whole). Cases are drawn in chunks of ``--chunk`` (seeds
0, 1, ...), each chunk's result appended to ``DIR/NAME-PRECISION.jsonl``, so a run
cut short keeps what it judged; a failure ends the run with its diagnosis.
``--table`` writes the Markdown table of every result in ``DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cross_entropy  # noqa: E402
import kl_div  # noqa: E402
import layer_norm  # noqa: E402
import rms_norm  # noqa: E402
import softmax  # noqa: E402
import swiglu  # noqa: E402

from numoracle import check_kernel, get_model  # noqa: E402
from numoracle.errors import KernelMismatch  # noqa: E402

CHECKS = {**softmax.CHECKS, **layer_norm.CHECKS, **rms_norm.CHECKS, **cross_entropy.CHECKS,
          **swiglu.CHECKS, **kl_div.CHECKS}


def run(name: str, precision: str, cases: int, chunk: int, out: Path | None,
        backend: str = "triton") -> None:
    spec = dict(CHECKS[name])
    fn = spec.pop("fn")
    claim = get_model("fp32") if precision == "ieee" else (
        "fp32" if backend == "triton" else get_model("fp32", accuracy="triton"))
    sink = None if out is None else (out / f"{name}-{precision}.jsonl")
    done, seed = 0, 0
    while done < cases:
        n = min(chunk, cases - done)
        t0 = time.perf_counter()
        row = {"name": name, "precision": precision, "seed": seed}
        try:
            r = check_kernel(fn, op=f"triton_{name}_{precision}", precision=claim,
                             backend=backend, examples=n, seed=seed, store=None, **spec)
            row.update(verdict="pass", cases=r.cases, worst_ratio=r.worst_ratio,
                       claimed=str(r.precision))
        except KernelMismatch as exc:
            v = exc.verdict
            row.update(verdict="FAIL", cases=None, worst_ratio=getattr(v, "worst_ratio", None),
                       headline=str(getattr(v, "diagnosis", exc)).split("\n")[0],
                       per_model={o.name: o.per_model for o in getattr(v, "outputs", {}).values()
                                  if not o.passed})
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        if sink is not None:
            with sink.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if row["verdict"] != "pass":
            return
        done += n
        seed += 1


def table(folder: Path) -> str:
    lines = ["| kernel | claim | verdict | cases judged | worst ratio | headline |",
             "|---|---|---|---|---|---|"]
    for path in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(s) for s in path.read_text().splitlines() if s.strip()]
        if not rows:
            continue
        fail = next((r for r in rows if r["verdict"] != "pass"), None)
        judged = sum(r["cases"] or 0 for r in rows if r["verdict"] == "pass")
        worst = max((r["worst_ratio"] or 0.0) for r in rows)
        head = "" if fail is None else fail.get("headline", "").replace("|", "/")
        lines.append(f"| {rows[0]['name']} | {rows[0]['precision']} | "
                     f"{'FAIL' if fail else 'pass'} | {judged}{' + the failing case' if fail else ''}"
                     f" | {worst:.3g} | {head} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", choices=sorted(CHECKS))
    ap.add_argument("--precision", choices=("triton", "ieee"), default="triton")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--table", type=Path, default=None)
    ap.add_argument("--backend", default="triton",
                    help="triton (a CUDA GPU); torch-cpu with TRITON_INTERPRET=1 tries the "
                         "examples on the host, in Triton's interpreter")
    args = ap.parse_args()
    if args.table is not None:
        print(table(args.table))
        return
    if args.name is None:
        ap.error("give an example NAME or --table DIR")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    run(args.name, args.precision, args.cases, args.chunk, args.out, args.backend)


if __name__ == "__main__":
    main()
