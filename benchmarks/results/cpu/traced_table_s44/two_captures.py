"""The softmax_loss bf16 case of ratio_history.md judged twice in one process: with
the graph of a symbolic capture (the first capture of a fresh reference), then with a
capture on the case's values (the reference's kept graphs dropped and symbolic
captures priced out, as a history of other shapes does). Prints each judgement's
worst ratios per output, a hash of the kernel's outputs, and whether the two graphs
call the same ops.

    PYTHONPATH=$PWD python benchmarks/results/cpu/traced_table_s44/two_captures.py
"""
import hashlib
import math
import warnings

from numoracle.oracle import fused_cpu

fused_cpu.LOOP_MIN = 1
import numoracle.oracle.traced.op as traced_op  # noqa: E402
from benchmarks.traced.references import make_op  # noqa: E402
from numoracle.cases.case import Case  # noqa: E402
from numoracle.checking.check import check_case  # noqa: E402
from numoracle.kernels.torch_traced import reference_targets  # noqa: E402

warnings.simplefilter("ignore")
op = make_op("softmax_loss", grads=True)
target = next(t for t in reference_targets(op.name) if t.name == "torch-cpu-bf16")
case = Case(op="traced_softmax_loss", params={"batch": 15, "n": 60}, storage="bf16",
            family="cancel", seed=4244799, layouts={}, overlays=())
graphs = []
capture = traced_op.capture_graph


def logged(*args, **kwargs):
    graphs.append(capture(*args, **kwargs))
    return graphs[-1]


traced_op.capture_graph = logged
for label in ("symbolic capture", "capture on values"):
    if graphs:  # as after other shapes: no kept graph, a symbolic capture not bought
        reference = op.ref
        reference._graphs.clear()
        reference._symbolic.clear()
        reference.symbolic_seconds = math.inf
    v = check_case(case, target)
    print(f"{label} (symbolic={graphs[-1].symbolic}): worst {v.worst_ratio!r}",
          {n: round(o.worst_ratio, 6) for n, o in v.outputs.items()},
          "kernel outputs", hashlib.sha1(b"".join(v.got[n].tobytes() for n in sorted(v.got))
                                         ).hexdigest()[:12])


def ops(g):
    g.module.graph.eliminate_dead_code()
    return [str(n.target) for n in g.module.graph.nodes if n.op == "call_function"]


print("same ops:", ops(graphs[0]) == ops(graphs[-1]))
