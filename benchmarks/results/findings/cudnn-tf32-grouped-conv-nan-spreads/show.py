"""cuDNN grouped conv2d with TF32 on: a non-finite input of one group turns finite
results of other groups into NaN.

    python benchmarks/results/findings/cudnn-tf32-grouped-conv-nan-spreads/show.py [--gpu]

1. The two stored cases (``*/arrays.npz``, saved by the H100 limits sweep): for each
   output, the groups whose outputs hold a NaN, and the groups whose own inputs
   hold a non-finite value. A grouped convolution's output of group g reads only
   group g's channels of x and weight (and of grad_output for grad_input,
   grad_weight), so a NaN in a group with finite inputs came from another group.
2. With ``--gpu``: the same arrays through F.conv2d and autograd under the four
   cuDNN modes of each precision (TF32 on/off, contiguous/channels_last), the
   NaN-in-finite-group count per output.
"""

import sys
from pathlib import Path

import numpy as np

from numoracle.store.repro import load_repro

HERE = Path(__file__).resolve().parent


def groups_of(name: str, arr: np.ndarray, g: int) -> np.ndarray:
    """The group of each element of an input or output (its channel axis 1; for
    weight and grad_weight the output-channel axis 0)."""
    axis = 0 if name.endswith("weight") else 1
    if name.endswith("bias"):
        axis = 0
    ch = arr.shape[axis]
    grp = np.arange(ch) // (ch // g)
    shape = [1] * arr.ndim
    shape[axis] = ch
    return np.broadcast_to(grp.reshape(shape), arr.shape)


READS = {"y": ("x", "weight", "bias"), "grad_input": ("weight", "grad_output"),
         "grad_weight": ("x", "grad_output"), "grad_bias": ("grad_output",)}


def nan_in_finite_groups(p: dict, inputs: dict, got: dict) -> dict:
    g = p["groups"]
    out = {}
    for name, arr in got.items():
        bad_in = set()
        for src in READS[name]:
            if src in inputs:
                a = inputs[src]
                bad_in |= set(groups_of(src, a, g)[~np.isfinite(a)].tolist())
        nan_groups = set(groups_of(name, arr, g)[np.isnan(arr)].tolist())
        out[name] = {"groups with NaN": sorted(nan_groups),
                     "groups with a non-finite input": sorted(bad_in),
                     "NaN in groups with finite inputs": int(sum(
                         np.isnan(arr)[groups_of(name, arr, g) == k].sum()
                         for k in nan_groups - bad_in))}
    return out


def on_gpu(p: dict, inputs: dict) -> None:
    import torch
    import torch.nn.functional as F

    for tf32 in (False, True):
        for cl in (False, True):
            torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
            fmt = torch.channels_last if cl else torch.contiguous_format
            x = torch.tensor(inputs["x"], dtype=torch.float32, device="cuda")
            x = x.to(memory_format=fmt).requires_grad_(True)
            w = torch.tensor(inputs["weight"], dtype=torch.float32, device="cuda")
            w = w.to(memory_format=fmt).requires_grad_(True)
            b = (torch.tensor(inputs["bias"], dtype=torch.float32, device="cuda")
                 .requires_grad_(True) if "bias" in inputs else None)
            y = F.conv2d(x, w, b, stride=p["stride"], padding=p["padding"],
                         dilation=p["dilation"], groups=p["groups"])
            y.backward(torch.tensor(inputs["grad_output"], dtype=torch.float32, device="cuda"))
            got = {"y": y, "grad_input": x.grad, "grad_weight": w.grad}
            if b is not None:
                got["grad_bias"] = b.grad
            got = {k: v.detach().double().cpu().numpy() for k, v in got.items()}
            counts = {k: v["NaN in groups with finite inputs"]
                      for k, v in nan_in_finite_groups(p, inputs, got).items()}
            print(f"  TF32 {'on ' if tf32 else 'off'} {'channels_last' if cl else 'contiguous'}:"
                  f" NaN in groups with finite inputs {counts}")


def main() -> None:
    for d in sorted(x for x in HERE.iterdir() if x.is_dir()):
        r = load_repro(d)
        p, inputs, got = r.case.params, r.inputs, r.got
        print(f"{d.name}: groups={p['groups']}, "
              + ", ".join(f"{k}{v.shape}" for k, v in inputs.items()))
        for name, row in nan_in_finite_groups(p, inputs, got).items():
            print(f"  recorded {name}: {row}")
        if "--gpu" in sys.argv:
            on_gpu(p, inputs)


if __name__ == "__main__":
    main()
