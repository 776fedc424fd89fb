"""Sweeps of the WGSL examples and of the Fortran + cuDNN program: correct kernels
over many cases, each mutant until caught (cases to catch, shrunk shape).

    python benchmarks/wgsl_sweep.py run JOB [--examples N] [--seed S] [--seconds T] --out F.json
    python benchmarks/wgsl_sweep.py merge DIR --md summary.md --json results.json

JOB: ``kan`` (spline orders 2-5, seed 001's shapes: widths up to 64 in and 256
out, batch 1-128), ``kan-order1``, ``matmul``, ``mutant:NAME`` (a mutant of
``examples/wgsl/check_wgsl.py``), ``fortran:VARIANT`` (``correct``,
``layout_trap``, ``layout_trap_grad``: ``examples/fortran_cudnn``). Several
``run`` processes with different seeds shard one job; ``merge`` adds them up.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from numoracle.foreign import run

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "wgsl"))
sys.path.insert(0, str(ROOT / "examples" / "fortran_cudnn"))


def _target(job: str, spec_dir: Path) -> tuple[Any, str]:
    if job.startswith("fortran:"):
        import check_conv2d_cudnn as fc  # noqa: PLC0415 - examples are scripts

        libs = fc.find_libraries()
        return fc.target(job.split(":", 1)[1], spec_dir=spec_dir), f"libraries {libs}"
    import check_wgsl as cw  # noqa: PLC0415 - examples are scripts
    from numoracle.foreign.wgsl import adapter_description  # noqa: PLC0415

    where = adapter_description()
    if job.startswith("mutant:"):
        name = job.split(":", 1)[1]
        return cw.target(cw.MUTANTS[name][0], name, spec_dir=spec_dir), where
    if job == "kan-order1":
        return cw.target("kan", order=1, spec_dir=spec_dir), where
    return cw.target(job, spec_dir=spec_dir), where


def run_job(job: str, examples: int, seed: int, seconds: float | None, out: Path) -> None:
    """One job (or one shard of it): its result as JSON in ``out``."""
    spec_dir = out.parent / ".targets"
    t0 = time.time()
    target, where = _target(job, spec_dir)
    res = run(target, examples=examples, seed=seed, seconds=seconds,
              store=out.parent / ".repros")
    out.write_text(json.dumps({
        "job": job, "seed": seed, "asked": examples, "cases": res.cases,
        "verdict": res.verdict, "worst_ratio": res.worst_ratio,
        "cases_to_catch": res.cases_to_catch, "repro_shape": res.repro_shape,
        "diagnosis": res.diagnosis, "unjudged": res.unjudged, "seconds": time.time() - t0,
        "where": where, "machine": platform.node()}, indent=2, default=str) + "\n")
    print(f"{job} seed {seed}: {res.verdict}, {res.cases} cases, worst ratio "
          f"{res.worst_ratio:.3g}, {time.time() - t0:.0f} s" +
          (f", caught at case {res.cases_to_catch}, shrunk to {res.repro_shape}"
           if res.verdict != "pass" else ""), flush=True)


def merge(folder: Path, md: Path, out_json: Path) -> None:
    """Every job's shards added up: a table in ``md``, the rows in ``out_json``."""
    rows: dict[str, dict[str, Any]] = {}
    for f in sorted(folder.glob("*.json")):
        r = json.loads(f.read_text())
        row = rows.setdefault(r["job"], {"job": r["job"], "cases": 0, "shards": 0,
                                         "verdicts": [], "worst_ratio": 0.0, "seconds": 0.0,
                                         "caught": [], "where": r["where"]})
        row["cases"] += r["cases"]
        row["shards"] += 1
        row["verdicts"].append(r["verdict"])
        row["worst_ratio"] = max(row["worst_ratio"], r["worst_ratio"] or 0.0)
        row["seconds"] = max(row["seconds"], r["seconds"])
        if r["verdict"] != "pass":
            row["caught"].append({"seed": r["seed"], "cases_to_catch": r["cases_to_catch"],
                                  "repro_shape": r["repro_shape"],
                                  "diagnosis": r["diagnosis"]})
    lines = ["| job | cases | verdict | worst ratio | cases to catch | shrunk to | seconds |",
             "|---|---|---|---|---|---|---|"]
    for row in rows.values():
        verdict = "pass" if set(row["verdicts"]) == {"pass"} else "FAIL"
        caught = row["caught"][0] if row["caught"] else {}
        lines.append(f"| {row['job']} | {row['cases']} | {verdict} | {row['worst_ratio']:.3g} | "
                     f"{caught.get('cases_to_catch', '')} | {caught.get('repro_shape', '')} | "
                     f"{row['seconds']:.0f} |")
    diag = [f"- {row['job']}: {row['caught'][0]['diagnosis']}" for row in rows.values()
            if row["caught"]]
    where = sorted({row["where"] for row in rows.values()})
    unfinished = [f"- {f.stem}: no result (killed at its time limit, or failed: its log "
                  "is in log.txt)" for f in sorted(folder.glob("*.log"))
                  if not f.with_suffix(".json").is_file()]
    md.write_text("\n".join(lines + ["", "Diagnoses:", *diag, "", "Where:",
                                     *[f"- {w}" for w in where], "", "Unfinished:",
                                     *unfinished]) + "\n")
    out_json.write_text(json.dumps(list(rows.values()), indent=2, default=str) + "\n")
    print(md.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("job")
    r.add_argument("--examples", type=int, default=1000)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--seconds", type=float, default=None)
    r.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("merge")
    m.add_argument("folder", type=Path)
    m.add_argument("--md", type=Path, required=True)
    m.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "run":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        run_job(args.job, args.examples, args.seed, args.seconds, args.out)
    else:
        merge(args.folder, args.md, args.json)


if __name__ == "__main__":
    main()
