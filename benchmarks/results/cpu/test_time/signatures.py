"""Distinct numba signatures each whole-rule loop is called with over the traced tests'
kinds of cases (the loops replaced by recorders: nothing compiles, nothing is judged).

    PYTHONPATH=CHECKOUT python signatures.py CHECKOUT
"""
import itertools, collections, sys, numpy as np, numba
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests/oracle/traced"]  # (a checkout)
import test_softmax_rows as S, test_softmax_backward_rows as SB, test_norm_rows as N
from numoracle.oracle import fused_cpu
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.traced.library import softmax as sm, normalization as nz
fused_cpu.LOOP_MIN = 1
SEEN = collections.defaultdict(set)
def rec(name):
    def f(*a):
        SEEN[name].add(tuple(str(numba.typeof(x)) for x in a))
        for x in a:
            if isinstance(x, np.ndarray) and x.flags.writeable and x.ndim:
                x[...] = False if x.dtype == bool else 1
        if name == "row_max":
            a[-1][:, 5] = 0
        return True
    return f
for mod in (fused_cpu._row_loops(), fused_cpu.softmax_grad_loops(), fused_cpu._norm_loops()):
    for n, v in list(vars(mod).items()):
        if hasattr(v, "py_func") and not n.startswith("_"):
            setattr(mod, n, rec(mod.__name__.split("._")[-1] + "." + n))
def run(f, *a):
    with np.errstate(all="ignore"):
        try: return f(*a)
        except Exception as e: return None
ctx = RuleContext(get_model("fp32"))
for kind, radii, special, lead, rule in itertools.product(["normal","ints"], ["exact","all","some"], [False, True], [False, True], ["softmax","log_softmax","safe_softmax"]):
    rng = np.random.default_rng(0)
    shape = (2, 3, 7) if lead else (3, 7)
    x = S._values(rng, shape, kind)
    if special: x = S._special_rows(x, rng).reshape(shape)
    t = S._tracked(x, rng, radii)
    fn = {"softmax": lambda c, v: sm.softmax(c, v, -1), "safe_softmax": lambda c, v: sm.softmax(c, v, -1, masked_rows="zero"), "log_softmax": lambda c, v: sm.log_softmax(c, v, -1)}[rule]
    run(fn, ctx, t)
for grad, kind, yr in itertools.product(["one_hot", "dense", "mixed", "zero_row", "special"], ["normal", "ints"], ["exact", "all"]):
    rng = np.random.default_rng(0)
    x = S._values(rng, (3, 7), kind)
    y = S._tracked(x, rng, yr)
    gt = S.gradient(rng, 3, 7, grad)
    run(sm.log_softmax_backward_rule, ctx, gt, y, -1)
for y_from, yr, gr in itertools.product(["normal","ints"], ["exact","all","some","shared"], ["exact","all","some","shared"]):
    rng = np.random.default_rng(0)
    y = SB._tracked(SB._sprinkled(SB._values(rng, (3, 7), y_from), rng, 2), rng, yr)
    g = SB._tracked(SB._sprinkled(SB._values(rng, (3, 7), "normal"), rng, 2), rng, gr)
    run(SB.rows.fused_softmax_backward, ctx, g, y, 1)
for fold in (False, True):
    N.rows.FOLD_SUMS = fold
    for kind, radii, affine, grad, mask in itertools.product(["normal", "ints"], ["exact","all","some"], ["none","exact","tracked"], ["exact","all","some"], [(True, True, True), (True, False, False), (False, True, True)]):
        c, x, w, b, shape = N._case([2], [5], kind, radii, False, affine, "fp32", False, 1)
        rng = np.random.default_rng(2)
        g = N._tracked(rng.standard_normal(x.shape), rng, grad)
        out = N._passes(nz.layer_norm_rule, c, x, shape, w, b, 1e-5)
        run(nz.layer_norm_rule, c, x, shape, w, b, 1e-5)
        if out is not None:
            run(nz.layer_norm_backward_rule, c, g, x, shape, out[1], out[2], w, b, mask)
tot = 0
for k in sorted(SEEN):
    print(f"{k:45s} {len(SEEN[k])}")
    tot += len(SEEN[k])
print("total", tot)
