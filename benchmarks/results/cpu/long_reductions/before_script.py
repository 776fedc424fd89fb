import sys, time, json
import numpy as np
from numoracle.cases.target import Target
from numoracle.kernels.numpy_targets import linear as correct_linear
from numoracle.oracle.precision import get_model
from numoracle.running.runner import run_target, default_strategy

def _fp16_acc_matmul(a, b):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for i in range(a.shape[1]):
        acc = (acc.astype(np.float32) + np.outer(a[:, i], b[i, :]).astype(np.float32)).astype(np.float16)
    return acc.astype(np.float32)

def fp16_accumulation_from_2048(x, weight, grad_output, bias=None):
    out = correct_linear(x, weight, grad_output, bias)
    if x.shape[1] >= 2048:
        out["y"] = _fp16_acc_matmul(x, weight.T) + (bias if bias is not None else np.float32(0))
    return out

t = Target(name="fp16_accumulation_from_2048", op="linear", backend="numpy", precision=get_model("fp32"), fn=fp16_accumulation_from_2048)
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    for mr in (None, 4096):
        t0 = time.time()
        strat = default_strategy(t, max_reduction=mr) if mr else None
        res = run_target(t, examples=int(sys.argv[3]), seed=seed, store=None, strategy=strat)
        print(json.dumps({"seed": seed, "max_reduction": mr, "verdict": res.verdict, "cases_to_catch": res.cases_to_catch, "cases": res.cases, "shape": getattr(res, "repro_shape", None), "seconds": round(time.time()-t0)}), flush=True)
