"""Softmax 256x4096 forward + backward (the table's case): the least process time of
eight evaluations after one warm-up. Run from the repository root, one thread:

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=$PWD \\
      python benchmarks/results/cpu/traced_softmax_rows/fwd_bwd.py LABEL
"""

import sys
import time

from benchmarks.traced.profile import _case
from numoracle.oracle.precision import get_model

op, given = _case("softmax", "realistic", True, "cpu")
model = get_model("fp32")
op.reference(given, {}, model)
best = 1e9
for _ in range(8):
    t = time.process_time()
    op.reference(given, {}, model)
    best = min(best, time.process_time() - t)
print(sys.argv[1] if len(sys.argv) > 1 else "", "fwd+bwd %.1f ms" % (best * 1e3))
