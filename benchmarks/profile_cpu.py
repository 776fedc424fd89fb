"""Line profile of the CPU reference of a linear backward (fp32 model), where its time goes.

    pip install line_profiler
    python benchmarks/profile_cpu.py [--shape 128,1024,1024] [--reuse-memory] > OUT.txt

Ten references after one warm-up, the lines of the contraction, its one-pass forms and
the store that take more than 1 ms in all (times in ms over the ten).
"""

from __future__ import annotations

import argparse
import io

from line_profiler import LineProfiler
from oracle_speed import linear_case

import numoracle.oracle.fused as fu
import numoracle.oracle.fused_cpu as fc
import numoracle.oracle.tracked as tr
from numoracle.oracle.memory import reuse_freed_memory
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="128,1024,1024", metavar="B,I,O")
    ap.add_argument("--reuse-memory", action="store_true")
    a = ap.parse_args()
    if a.reuse_memory:
        reuse_freed_memory()
    op, model = get_op("linear"), get_model("fp32")
    params, inputs, _ = linear_case(tuple(int(v) for v in a.shape.split(",")))
    lp = LineProfiler(tr._matmul, tr._exact_fused_matmul, tr._may_fit, tr._store, tr.sum_,
                      fu.exact_products, fu.operand_facts, fu.store_rounding,
                      fu.exact_contraction_radii, fc.exact_radii, fc.store_round)
    op.reference(inputs, params, model)
    lp.enable()
    for _ in range(10):
        op.reference(inputs, params, model)
    lp.disable()
    text = io.StringIO()
    lp.print_stats(stream=text, output_unit=1e-3)
    print(f"linear backward {a.shape}, fp32 model, 10 references, numba loops: "
          f"{fc.available()}, freed memory reused: {a.reuse_memory}")
    for line in text.getvalue().splitlines():
        cols = line.split()
        if line.startswith("File:") or line.startswith("Function:"):
            print(line)
        elif len(cols) > 4 and cols[0].isdigit() and cols[1].isdigit():
            try:
                if float(cols[2]) > 1.0:
                    print(line)
            except ValueError:
                continue


if __name__ == "__main__":
    main()
