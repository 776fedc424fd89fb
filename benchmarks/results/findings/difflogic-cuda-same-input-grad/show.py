"""difflogic's CUDA LogicLayer: the input gradient is wrong for a neuron that reads
the same input twice (``a[j] == b[j]``).

    python benchmarks/results/findings/difflogic-cuda-same-input-grad/show.py

``logic_layer_cuda_backward_x_kernel`` (difflogic/cuda/difflogic_kernel.cu) walks, for
input ``i``, the neurons listed for it (``given_x_indices_of_y``: a neuron is listed
once for its ``a`` input and once for its ``b`` input, so twice when both are ``i``)
and adds ``dy/da`` when ``a[j] == i``, else ``dy/db``. A neuron with ``a[j] == b[j] ==
i`` therefore contributes ``2 dy/da`` instead of ``dy/da + dy/db``: wrong for every
gate that is not symmetric in its inputs (ids 2, 3, 4, 5, 10, 11, 12, 13). The
layer's own ``connections='random'`` draws ``a`` and ``b`` independently, so such
neurons occur whenever ``2 out_dim > in_dim`` is possible.

1. The stored repro (the H100's output of the kernel, shrunk to one sample, one
   input, one neuron, on the exact family): the kernel's ``grad_input``, the exact
   derivative of ``sum_g p_g gate_g(x, x)`` in mpmath (60 digits), and what the kernel's
   formula computes (``2 sum_g p_g d gate_g/da``), in mpmath too.
2. The 860 failing cases of the H100 sweep (``sweep_failures.json``, 2,001 cases):
   in how many some neuron reads one input twice; the kernels' formulas emulated in
   NumPy float32 (same expressions, same order; not the kernel itself) judged by the
   oracle as written and with the branch fixed (``dy/db`` for the second listing).
"""

from __future__ import annotations

import json
from pathlib import Path

import mpmath
import numpy as np

from numoracle.cases.case import Case
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.store.repro import load_repro

HERE = Path(__file__).resolve().parent
F = np.float32

#: gate_g(a, b) = c1 + ca a + cb b + cab ab, difflogic's order (numoracle.oracle.logic_gates)
COEF = np.array([[0, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, -1], [0, 1, 0, 0], [0, 0, 1, -1],
                 [0, 0, 1, 0], [0, 1, 1, -2], [0, 1, 1, -1], [1, -1, -1, 1], [1, -1, -1, 2],
                 [1, 0, -1, 0], [1, 0, -1, 1], [1, -1, 0, 0], [1, -1, 0, 1], [1, 0, 0, -1],
                 [1, 0, 0, 0]])


def softmax32(w: np.ndarray) -> np.ndarray:
    w = w.astype(F)
    e = np.exp(w - w.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(F)


def dy_da(w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The a-branch of logic_layer_cuda_backward_x_kernel, float32, its bracketing."""
    one, two = F(1), F(2)
    return (((w[1] * b + w[2] * (one - b) + w[3]) + (w[4] * -b + w[6] * (one - two * b)
             + w[7] * (one - b))) + ((w[8] * (b - one) + w[9] * (two * b - one) + w[11] * b)
             + (-w[12] + w[13] * (b - one) + w[14] * -b)))


def dy_db(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The b-branch of the same kernel."""
    one, two = F(1), F(2)
    return (((w[1] * a + w[2] * -a + w[4] * (one - a)) + (w[5] + w[6] * (one - two * a)
             + w[7] * (one - a))) + ((w[8] * (a - one) + w[9] * (two * a - one) - w[10])
             + (w[11] * (a - one) + w[13] * a + w[14] * -a)))


def grad_input(x: np.ndarray, ia: np.ndarray, ib: np.ndarray, p: np.ndarray, g: np.ndarray,
               fixed: bool) -> np.ndarray:
    """The kernel's loop over the neurons listed for each input (x: batch x in)."""
    out = np.zeros(x.shape, F)
    for i in range(x.shape[1]):
        listed = [j for j in range(len(ia)) if ia[j] == i] + [j for j in range(len(ib))
                                                             if ib[j] == i]
        seen: set[int] = set()
        acc = np.zeros(x.shape[0], F)
        for j in sorted(listed):  # the constructor lists y in neuron order per input
            if ia[j] == i and not (fixed and j in seen):
                d = dy_da(p[j], x[:, ib[j]])
            else:
                d = dy_db(p[j], x[:, ia[j]])
            seen.add(j)
            acc = (acc + d * g[:, j]).astype(F)
        out[:, i] = acc
    return out


def judge(ref: object, got: np.ndarray) -> float:
    value = ref.value + (ref.lo if ref.lo is not None else 0.0)  # type: ignore[attr-defined]
    bound = ref.det + ref.ref_err  # type: ignore[attr-defined]
    err = np.abs(got - value)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(np.isfinite(bound), np.where(bound > 0, err / bound,
                                                  np.where(err == 0, 0.0, np.inf)), 0.0)
    return float(r.max()) if r.size else 0.0


def stored_repro() -> None:
    r = load_repro(HERE / "repro")
    x = r.inputs["x"].astype(F)
    p = softmax32(r.inputs["weights"])[0]
    g = r.inputs["grad_output"][0, 0]
    mpmath.mp.dps = 60
    w = [mpmath.mpf(float(v)) for v in r.inputs["weights"][0].astype(F)]
    z = mpmath.fsum(mpmath.exp(v) for v in w)
    pe = [mpmath.exp(v) / z for v in w]
    xv = mpmath.mpf(float(x[0, 0]))
    da = [c[1] + c[3] * xv for c in COEF]  # d gate/da at b = x
    db = [c[2] + c[3] * xv for c in COEF]
    exact = mpmath.mpf(float(g)) * mpmath.fsum(pg * (u + v) for pg, u, v in zip(pe, da, db))
    formula = mpmath.mpf(float(g)) * 2 * mpmath.fsum(pg * u for pg, u in zip(pe, da))
    ref = get_op("logic_layer").reference(r.inputs, r.case.params, get_model("fp32"))
    print(f"stored repro: {r.case.describe() if hasattr(r.case, 'describe') else r.case}")
    print(f"  a = b = input 0, x = {float(x[0, 0])}, grad_output = {float(g):.9g}")
    print(f"  H100 kernel grad_input      {float(r.got['grad_input'][0, 0]):.9g}")
    print(f"  exact (mpmath, 60 digits)   {mpmath.nstr(exact, 12)}")
    print(f"  kernel's formula 2 g dy/da  {mpmath.nstr(formula, 12)}")
    print(f"  oracle reference, bound     {float(ref['grad_input'].value[0, 0]):.9g}, "
          f"{float(ref['grad_input'].det[0, 0]):.3g}")
    one = np.zeros(1, int)
    gg = np.array([[g]], F)
    as_written, fixed = (float(grad_input(x, one, one, p[None], gg, fix)[0, 0])
                         for fix in (False, True))
    print(f"  float32 emulation           as written {as_written:.9g}, fixed {fixed:.9g}")


@np.errstate(invalid="ignore", over="ignore")
def sweep() -> None:
    data = json.loads((HERE / "sweep_failures.json").read_text())
    op, model = get_op("logic_layer"), get_model("fp32")
    rows = {"same input twice": 0, "emulation fails": 0, "fixed emulation passes": 0}
    for f in data["failures"]:
        case = Case.from_dict(f["case"])
        inp = case.inputs()
        ia, ib = inp["idx_a"].astype(int), inp["idx_b"].astype(int)
        rows["same input twice"] += bool((ia == ib).any())
        x, g = inp["x"].astype(F), inp["grad_output"].astype(F)
        p = softmax32(inp["weights"])
        ref = op.reference(inp, case.params, model, ("grad_input",))["grad_input"]
        bad = judge(ref, grad_input(x, ia, ib, p, g, False).astype(np.float64))
        good = judge(ref, grad_input(x, ia, ib, p, g, True).astype(np.float64))
        rows["emulation fails"] += bad >= 1
        rows["fixed emulation passes"] += good < 1
    print(f"H100 sweep ({data['command']}): {data['alarms']} of {data['cases']} cases failed")
    for k, v in rows.items():
        print(f"  {k}: {v} of {len(data['failures'])}")


if __name__ == "__main__":
    stored_repro()
    sweep()
