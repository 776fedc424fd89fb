"""Per-case worst ratios of the softmax_loss bf16 sweep (LOOP_MIN = 1), for comparing trees."""
import json, sys, warnings
from numoracle.oracle import fused_cpu
fused_cpu.LOOP_MIN = 1
import os
from numoracle.oracle import tracked, fused, single_products
T = os.environ.get("TOGGLE", "")
if T == "loop": tracked._loop_takes = lambda *a: False
if T == "f32prod": single_products.upper_product = lambda *a, **k: None
if T == "scratch": fused.scratch = lambda slot, like, dtype=fused.np.float64: fused._owned(like, dtype)
if T == "same": tracked._same_radii = lambda t: t.prob is t.det
print("toggle", T)
import numoracle.running.runner as runner
from benchmarks.traced.references import make_op
from numoracle.api import check_kernel
from numoracle.kernels.torch_traced import reference_targets

rows = []
real = runner.check_case
def rec(case, *a, **k):
    v = real(case, *a, **k)
    rows.append({"full": repr(case), "params": repr(case.params), "seed": case.seed, "family": case.family,
                 "worst": v.worst_ratio,
                 "outs": {n: o.worst_ratio for n, o in v.outputs.items()}})
    return v
runner.check_case = rec
op = make_op("softmax_loss", grads=True)
target = next(t for t in reference_targets(op.name) if t.name == "torch-cpu-bf16")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        check_kernel(target.fn, op=op.name, precision=target.precision, backend=target.backend,
                     examples=int(sys.argv[2]), seed=int(sys.argv[3]), store=None, name=target.name, max_overlays=0)
    except Exception as e:
        print("raised", type(e).__name__, str(e)[:300])
json.dump(rows, open(sys.argv[1], "w"), indent=1)
print(max(r["worst"] for r in rows), len(rows))
