"""The real race between the phases of the CuPy trainer, over many random problems.

Each trial draws an MLP problem (batch 1-2048, 2-5 steps, random sizes and
optimizer) and runs it twice on the GPU with the same slow accumulation
(:data:`~numoracle.kernels.cupy_mlp.RACE_SPIN_CYCLES`): ``ordered`` (one
stream: the update waits for the accumulation) and ``racing`` (the
``phase_race`` defect: the update on a second stream, no wait). Each is judged
with the teacher-forced check; the ordered runs must pass, the racing ones
should fail.

Usage: ``python benchmarks/optim_race.py OUT_DIR [--trials N] [--spin CYCLES]``;
writes ``OUT_DIR/optim_race.json`` (needs CuPy and a GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from optim_sweep import _cfg, _mlp_data

from numoracle.kernels.cupy_mlp import RACE_SPIN_CYCLES, cupy_mlp_step
from numoracle.trajectory import check_mlp_trajectory


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--spin", type=int, default=RACE_SPIN_CYCLES,
                    help=f"clock cycles of the slow accumulation (default {RACE_SPIN_CYCLES})")
    a = ap.parse_args()
    rng = np.random.default_rng(20240612)
    rows = []
    t0 = time.perf_counter()
    for _ in range(a.trials):
        cfg = _cfg(rng)
        steps, batch = int(rng.integers(2, 6)), round(2 ** rng.uniform(0, 11))
        d = _mlp_data(rng, steps, batch)
        row: dict[str, object] = {"cfg": repr(cfg), "steps": steps, "batch": batch}
        for name, bugs in (("ordered", ()), ("racing", ("phase_race",))):
            v = check_mlp_trajectory(cupy_mlp_step(cfg, bugs, spin_cycles=a.spin), cfg,
                                     d["params"], d["xs"], d["labels"],
                                     diagnose_failure=False, free_running=False)
            ff = v.first_failure
            row[name] = {"passed": v.passed, "worst_ratio": v.worst_ratio,
                         "first_step": ff.step if ff else None,
                         "first_tensor": ff.tensor if ff else None}
        rows.append(row)
    summary = {"trials": len(rows), "spin_cycles": a.spin,
               "ordered_passed": sum(bool(r["ordered"]["passed"]) for r in rows),  # type: ignore[index]
               "racing_caught": sum(not r["racing"]["passed"] for r in rows),  # type: ignore[index]
               "seconds": round(time.perf_counter() - t0, 1)}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "optim_race.json").write_text(json.dumps({"summary": summary, "rows": rows},
                                                       indent=1, default=str))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
