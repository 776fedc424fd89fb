"""The error of ATen's vectorised float erf (Abramowitz & Stegun 7.1.26 with fused
multiply-adds): the approximation's, a first-order running bound of its fp32 evaluation,
and an emulation's on a dense grid; in ulp(1) = 2^-23.

    PYTHONPATH=$PWD python benchmarks/results/cpu/gelu_backward/erf_bound.py
"""
import math

import numpy as np
import torch

from tests.oracle.test_accuracy import _vectorised_erf

u = 2.0**-24
ULP1 = 2.0**-23
c = [float(np.float32(v)) for v in (0.3275911, 0.254829592, -0.284496736, 1.421413741,
                                     -1.453152027, 1.061405429)]
x = np.linspace(0, 10, 20_000_001)
t = 1 / (1 + c[0] * x)
h4 = c[5] * t + c[4]
h3 = h4 * t + c[3]
h2 = h3 * t + c[2]
h1 = h2 * t + c[1]
# each Horner step's rounding (u of its result) carried by the powers of t after it
r_err = u * (np.abs(h4) * t**3 + np.abs(h3) * t**2 + np.abs(h2) * t + np.abs(h1))
dr_dt = ((4 * c[5] * t + 3 * c[4]) * t + 2 * c[3]) * t + c[2]
e = np.exp(-x * x)
q = h1 * t * e
# t: two roundings; exp within 1 ulp plus the rounding of x*x; the product e*t: one
q_err = t * e * (r_err + np.abs(dr_dt) * 2 * u * t) + np.abs(q) * (2 * u + 2 * u + x * x * u + u)
total = q_err + u * np.abs(1 - q)  # the last fused multiply-add
k = int(total.argmax())
print(f"evaluation rounding bound: {total[k] / ULP1:.3f} ulp(1) at x = {x[k]:.4f}")
xs = torch.linspace(0, 6, 6_000_001, dtype=torch.float64)
for name, coef in (("exact", [0.3275911, 0.254829592, -0.284496736, 1.421413741,
                              -1.453152027, 1.061405429]), ("fp32", c)):
    tt = 1 / (1 + coef[0] * xs)
    r = (((coef[5] * tt + coef[4]) * tt + coef[3]) * tt + coef[2]) * tt + coef[1]
    err = (1 - r * tt * torch.exp(-xs * xs) - torch.erf(xs)).abs()
    j = int(err.argmax())
    print(f"approximation error, {name} coefficients: {err[j].item():.4g} "
          f"({err[j].item() / ULP1:.3f} ulp(1)) at x = {xs[j].item():.4f}")
worst, where = 0.0, 0.0
for lo, hi, n in ((0, 6, 6_000_001), (0, 0.1, 2_000_001), (0.5, 1.5, 2_000_001)):
    g = np.linspace(lo, hi, n).astype(np.float32)
    err = np.abs(_vectorised_erf(g).astype(np.float64)
                 - torch.erf(torch.from_numpy(g).double()).numpy())
    j = int(err.argmax())
    if err[j] > worst:
        worst, where = float(err[j]), float(g[j])
print(f"emulated vectorised erf: worst {worst:.4g} ({worst / ULP1:.3f} ulp(1)) at x = {where:.4f}")
print(f"claimed (torch-cpu): 2 ulps + 8 ulp(1); {math.ceil(1.26 + total[k] / ULP1)} needed")
