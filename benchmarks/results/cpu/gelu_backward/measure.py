"""torch's CPU GELU backward (fp32) against float64: why the traced vjp's bound rejects it.

    python benchmarks/results/cpu/gelu_backward/measure.py
"""
import math

import numpy as np
import torch

x = torch.linspace(-3, 3, 200001, dtype=torch.float32)
exact = torch.erf(x.double())
ulp = np.spacing(np.abs(exact.numpy()).astype(np.float32)).astype(np.float64)
print("torch.erf (fp32) worst error:", f"{((torch.erf(x).double() - exact).abs().numpy() / ulp).max():.3f}",
      "ulps")
x.requires_grad_(True)
g = torch.autograd.grad(torch.nn.functional.gelu(x).sum(), x)[0].double()
xd = x.detach().double()
want = 0.5 * (1 + torch.erf(xd / math.sqrt(2))) + xd * torch.exp(-0.5 * xd * xd) / math.sqrt(2 * math.pi)
err = (g - want).abs().numpy()
k = int(err.argmax())
print(f"gelu backward (fp32, dy = 1) worst absolute error: {err[k]:.3g} at x = {xd[k].item():.4f}, "
      f"{err[k] / np.spacing(np.float32(abs(want[k].item()))):.2f} ulps of the result "
      f"({want[k].item():.4f}); {err[k] / np.spacing(np.float32(1.0)):.2f} ulp(1)")
print("torch", torch.__version__, "| CPU capability", torch.backends.cpu.get_cpu_capability())
