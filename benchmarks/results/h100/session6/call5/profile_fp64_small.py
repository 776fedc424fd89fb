import cProfile, pstats, sys, numpy as np, cupy
sys.path.insert(0, "benchmarks")
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
op = get_op("linear"); p = op.validate({"batch": 128, "in_features": 1024, "out_features": 1024, "bias": True})
rng = np.random.default_rng(0)
inp = {k: cupy.asarray(rng.standard_normal(s)) for k, s in op.input_shapes(p).items()}
m = get_model("fp64")
for _ in range(3): op.reference(inp, p, m)
cupy.cuda.Device().synchronize()
pr = cProfile.Profile(); pr.enable()
for _ in range(5): op.reference(inp, p, m)
cupy.cuda.Device().synchronize(); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(30)
pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
