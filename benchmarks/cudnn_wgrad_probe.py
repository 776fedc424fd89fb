"""Replays a stored conv2d case on cuDNN under every mode of the torch-cuda
targets, with and without the GPU's memory nearly full, and says per output how
far each result is from the exact one (float64 on the host).

    python benchmarks/cudnn_wgrad_probe.py REPRO_DIR --out FILE.json

For each mode (TF32 off/on, cudnn.deterministic off/on, channels-last off/on):
normwise relative error and the fraction of bit-exact elements of y, grad_input
and grad_weight, and the CUDA kernels the call launched (torch.profiler, where it
works). ``pressed``: the same calls with all but ``--free-mib`` of the GPU's
memory taken by another allocation, as when other processes share the GPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from numoracle.kernels.torch_conv2d_cuda import CudnnMode, conv2d, launched_kernels
from numoracle.store.repro import load_repro


def _exact(inputs: dict[str, np.ndarray], params: dict[str, Any]) -> dict[str, np.ndarray]:
    x = torch.from_numpy(inputs["x"]).double().requires_grad_(True)
    w = torch.from_numpy(inputs["weight"]).double().requires_grad_(True)
    y = torch.nn.functional.conv2d(x, w, stride=tuple(params["stride"]),
                                   padding=tuple(params["padding"]),
                                   dilation=tuple(params["dilation"]), groups=params["groups"])
    gx, gw = torch.autograd.grad(y, (x, w), torch.from_numpy(inputs["grad_output"]).double())
    return {"y": y.detach().numpy(), "grad_input": gx.numpy(), "grad_weight": gw.numpy()}


def _errors(got: dict[str, Any], exact: dict[str, np.ndarray]) -> dict[str, Any]:
    out = {}
    for name, ref in exact.items():
        g = got[name].detach().double().cpu().numpy()
        err = np.abs(g - ref)
        out[name] = {"normwise": float(np.linalg.norm(err) / max(np.linalg.norm(ref), 1e-300)),
                     "max_abs": float(err.max()), "bit_exact": float(np.mean(err == 0))}
    return out


def _run(inputs: dict[str, np.ndarray], params: dict[str, Any], mode: CudnnMode,
         exact: dict[str, np.ndarray]) -> dict[str, Any]:
    dev = {k: torch.from_numpy(v.astype(np.float32)).cuda() for k, v in inputs.items()}
    kw = dict(params=params, mode=mode)
    try:
        got, kernels = launched_kernels(lambda: conv2d(dev["x"], dev["weight"],
                                                       dev["grad_output"], **kw))
    except Exception as exc:  # noqa: BLE001 - profiler or cuDNN failure: say which
        try:
            got, kernels = conv2d(dev["x"], dev["weight"], dev["grad_output"], **kw), [
                f"(profiler failed: {type(exc).__name__})"]
        except Exception as exc2:  # noqa: BLE001
            return {"error": f"{type(exc2).__name__}: {exc2}"[:300]}
    return {"errors": _errors(got, exact), "kernels": kernels}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repro", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--free-mib", type=int, default=64)
    args = ap.parse_args()
    r = load_repro(args.repro)
    params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in r.case.params.items()}
    exact = _exact(r.inputs, params)
    res: dict[str, Any] = {"case": r.case.describe(), "torch": torch.__version__,
                           "cudnn": torch.backends.cudnn.version(),
                           "gpu": torch.cuda.get_device_name(), "stored_got": _errors(
                               {k: torch.from_numpy(v) for k, v in r.got.items()}, exact),
                           "modes": {}}
    modes = [CudnnMode(tf32=t, deterministic=d, channels_last=c)
             for t, d, c in itertools.product((False, True), repeat=3)]
    for pressed in (False, True):
        hog = None
        if pressed:
            free, _ = torch.cuda.mem_get_info()
            hog = torch.empty(max(free - args.free_mib * 2**20, 0), dtype=torch.uint8,
                              device="cuda")
        for m in modes:
            key = m.target_name + (" pressed" if pressed else "")
            res["modes"][key] = _run(r.inputs, params, m, exact)
            e = res["modes"][key].get("errors", {}).get("grad_weight")
            print(f"{key:32s} grad_weight " + (f"normwise {e['normwise']:.3g} bit-exact "
                                                f"{e['bit_exact']:.3f}" if e else
                                                res["modes"][key].get("error", "")), flush=True)
        del hog
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
