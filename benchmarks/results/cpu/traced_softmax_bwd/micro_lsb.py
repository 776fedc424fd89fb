import time, numpy as np, sys
from numoracle.oracle import fused_cpu
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import softmax as sm
from numoracle.oracle.traced.library import _softmax_rows as rows
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import exact
R, C = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "256x32000").split("x"))
rng = np.random.default_rng(0)
x = rng.standard_normal((R, C)).astype(np.float32).astype(np.float64)
ctx = RuleContext(get_model("fp32"))
def t(f, n=5):
    f(); ts = []
    for _ in range(n):
        c = time.process_time(); f(); ts.append(time.process_time() - c)
    return min(ts) * 1e3
y = sm.log_softmax(ctx, exact(x), -1)
g = np.zeros((R, C)); g[np.arange(R), rng.integers(0, C, R)] = -1.0 / R
gt = exact(g)
print("log_softmax fwd %.1f ms" % t(lambda: sm.log_softmax(ctx, exact(x), -1)))
print("log_softmax bwd rule %.1f ms" % t(lambda: sm.log_softmax_backward_rule(ctx, gt, y, -1)))
import cProfile, pstats
cProfile.run('sm.log_softmax_backward_rule(ctx, gt, y, -1); sm.log_softmax(ctx, exact(x), -1)', '/tmp/smb/q.out')
pstats.Stats('/tmp/smb/q.out').sort_stats('tottime').print_stats(10)
