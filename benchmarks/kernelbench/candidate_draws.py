"""What the candidate's process is handed per case, with the inputs sent and with the
process drawing them itself (``NUMORACLE_KERNELBENCH_DRAWS=host`` / ``device``).

Each official problem named is judged against itself (``ModelNew = Model``, fp32,
the official case only) at reduced sizes, ``--repeat`` times per setting in turn,
each a fresh judgement (the least seconds kept).
Per judgement: the bytes of the request sent to the candidate's process (its pickle
plus the shared inputs file it names), the bytes of host arrays the judge made of the
inputs, the seconds of the phase ``candidate runs`` and of the whole judgement, and
the verdict (the two settings must agree).

    python -m benchmarks.kernelbench.candidate_draws --problems DIR/level1/19_ReLU.py ... \\
        [--elements 4194304] [--device cpu] [--repeat 2] --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main"]


def _measure(problem: Path, elements: int, device: str, repeat: int) -> dict[str, Any]:
    from benchmarks.kernelbench.candidates import write_candidate  # noqa: PLC0415
    from numoracle.kernelbench import sandbox  # noqa: PLC0415
    from numoracle.kernelbench.cases import KBCase, reduced_sizes  # noqa: PLC0415
    from numoracle.kernelbench.judge import judge  # noqa: PLC0415
    from numoracle.kernelbench.problem import load_problem  # noqa: PLC0415

    module = sys.modules["numoracle.kernelbench.judge"]
    p = load_problem(problem)
    base = p.dropout_off()
    sizes = reduced_sizes(p, base, most=elements) or {}
    case = KBCase(sizes=tuple(sorted(sizes.items())))
    sent: list[int] = []
    host: list[int] = []
    shared, draw = sandbox.Sandbox._shared, module._Context._draw

    def spy_shared(self: Any, request: Any) -> Any:
        out = shared(self, request)
        sent.append(len(pickle.dumps(out)) + out.get("shared_inputs", (None, 0))[1])
        return out

    def spy_draw(self: Any, *args: Any) -> Any:
        out = draw(self, *args)
        host.append(sum(a.nbytes for a in out if isinstance(a, np.ndarray)))
        return out

    row: dict[str, Any] = {"problem": f"{problem.parent.name}/{problem.stem}",
                           "sizes": sizes}
    sandbox.Sandbox._shared, module._Context._draw = spy_shared, spy_draw
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cand = write_candidate(Path(tmp), problem, "model")
            for _ in range(repeat):  # the settings in turn; the least seconds kept
                for mode in ("host", "device"):
                    os.environ["NUMORACLE_KERNELBENCH_DRAWS"] = mode
                    sent.clear()
                    host.clear()
                    t = time.perf_counter()
                    j = judge(problem, cand, examples=0, case=case, device=device,
                              shrink=False)
                    seconds = time.perf_counter() - t
                    runs = j.timings.get("candidate runs", 0.0)
                    last = row.get(mode, {})
                    row[mode] = {"status": j.status, "sent_bytes": sum(sent),
                                 "judge_host_input_bytes": sum(host),
                                 "candidate_runs_s": round(min(runs, last.get(
                                     "candidate_runs_s", runs)), 3),
                                 "seconds": round(min(seconds, last.get("seconds", seconds)),
                                                  3)}
    finally:
        sandbox.Sandbox._shared, module._Context._draw = shared, draw
        os.environ.pop("NUMORACLE_KERNELBENCH_DRAWS", None)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", type=Path, required=True)
    ap.add_argument("--elements", type=int, default=1 << 22,
                    help="the float64 floor of the reduced sizes, in elements")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=2, help="judgements per setting")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = []
    for problem in args.problems:
        row = _measure(problem, args.elements, args.device, args.repeat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
