import warnings, time
from benchmarks.traced.references import make_op
from numoracle.api import check_kernel, add_listener
from numoracle.kernels.torch_traced import reference_targets
warnings.simplefilter("ignore")
res = []
add_listener(res.append)
op = make_op("attention", grads=True)
for name in ("torch-cpu-fp32", "torch-cpu-bf16"):
    t = next(t for t in reference_targets(op.name) if t.name == name)
    t0 = time.perf_counter()
    try:
        check_kernel(t.fn, op=op.name, precision=t.precision, backend=t.backend, examples=150, seed=0, store=None, name=t.name)
        status = "pass"
    except Exception as e:
        status = f"{type(e).__name__}: {str(e)[:300]}"
    r = res[-1]
    print(f"| attention | {name} | {status} | {r.cases} | {r.failures} | {r.worst_ratio:.4f} | {time.perf_counter()-t0:.0f} s |")
