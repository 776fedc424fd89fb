import sys, time
import numpy as np
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import softmax as sm
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import exact
rng = np.random.default_rng(0)
shape = tuple(int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "256x4096").split("x"))
x = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
g = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
ctx = RuleContext(get_model("fp32"))
y = sm.softmax(ctx, exact(x), -1)
gt = exact(g)
def once():
    return sm.softmax_backward_rule(ctx, gt, y, -1)
once()
ts = []
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 9):
    c = time.process_time(); once(); ts.append(time.process_time() - c)
print(shape, "softmax_backward_rule min %.2f ms, median %.2f" % (min(ts)*1e3, sorted(ts)[len(ts)//2]*1e3))
