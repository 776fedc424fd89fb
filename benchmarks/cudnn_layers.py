"""cuDNN on the conv2d layers of two real networks: what precision and which
algorithm each output really gets, judged against what cuDNN may legitimately do.

    python benchmarks/cudnn_layers.py --out DIR [--batch 8] [--cases 2] [--nets resnet18,unet]

For every conv2d layer of ResNet-18 (ImageNet, 224×224) and of a small UNet
(32 base channels, 128×128), cuDNN through torch with TF32 off and on,
``cudnn.deterministic`` off and on, and for each output (y, grad_input,
grad_weight):

* the worst deterministic and probabilistic err/bound under the model the
  target claims (its formats, every algorithm class cuDNN may choose);
* the effective precision: the most precise of fp32, fp32 with Winograd/FFT,
  tf32, tf32 with Winograd/FFT whose bound holds on every case;
* the algorithm, from the names of the CUDA kernels the call launched
  (torch.profiler): ``winograd``, ``fft`` or a GEMM (``implicit_gemm``,
  ``sgemm``, ``xmma``) — what torch hands cuDNN's heuristics to choose;
* the exact-family verdict: on inputs where every summation is exact, whether
  the output is bit-exact (a summation ran) or not (a transform ran), and
  whether it is within the claimed bound.

The references run on the GPU's float64 path (CuPy). Writes DIR/cudnn_layers.json
and DIR/cudnn_layers.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from numoracle.cases.case import Case
from numoracle.checking.check import run_kernel
from numoracle.checking.verdict import compare
from numoracle.kernels import get_target
from numoracle.kernels.torch_conv2d_cuda import algorithm_of, launched_kernels
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.transforms import ALGORITHMS

#: (network, layer, in, out, map, kernel, stride) with "same" padding k // 2
RESNET18 = [
    ("conv1", 3, 64, 224, 7, 2),
    ("layer1 3x3", 64, 64, 56, 3, 1),
    ("layer2 3x3/2", 64, 128, 56, 3, 2),
    ("layer2 3x3", 128, 128, 28, 3, 1),
    ("layer2 down 1x1/2", 64, 128, 56, 1, 2),
    ("layer3 3x3/2", 128, 256, 28, 3, 2),
    ("layer3 3x3", 256, 256, 14, 3, 1),
    ("layer3 down 1x1/2", 128, 256, 28, 1, 2),
    ("layer4 3x3/2", 256, 512, 14, 3, 2),
    ("layer4 3x3", 512, 512, 7, 3, 1),
    ("layer4 down 1x1/2", 256, 512, 14, 1, 2),
]
UNET = [
    ("enc1a", 3, 32, 128, 3, 1), ("enc1b", 32, 32, 128, 3, 1),
    ("enc2a", 32, 64, 64, 3, 1), ("enc2b", 64, 64, 64, 3, 1),
    ("enc3a", 64, 128, 32, 3, 1), ("enc3b", 128, 128, 32, 3, 1),
    ("bottleneck a", 128, 256, 16, 3, 1), ("bottleneck b", 256, 256, 16, 3, 1),
    ("dec3a (concat)", 256, 128, 32, 3, 1), ("dec3b", 128, 128, 32, 3, 1),
    ("dec2a (concat)", 128, 64, 64, 3, 1), ("dec2b", 64, 64, 64, 3, 1),
    ("dec1a (concat)", 64, 32, 128, 3, 1), ("dec1b", 32, 32, 128, 3, 1),
    ("head 1x1", 32, 2, 128, 1, 1),
]
NETS = {"resnet18": RESNET18, "unet": UNET}
TARGETS = ("torch-cuda-fp32", "torch-cuda-fp32-det", "torch-cuda-tf32", "torch-cuda-tf32-det")
OUTPUTS = ("y", "grad_input", "grad_weight")
#: the ladder of explanations, most precise first
LADDER = {
    "fp32": get_model("fp32"),
    "fp32 winograd/fft": get_model("fp32", algorithms=ALGORITHMS),
    "tf32": get_model("tf32", accumulate_rounding="rz"),
    "tf32 winograd/fft": get_model("tf32", accumulate_rounding="rz", algorithms=ALGORITHMS),
}


def claimed_rung(target: Any) -> str:
    """The rung of :data:`LADDER` whose bound is the target's claim (a claim of
    deterministic runs changes no bound)."""
    model = target.precision.with_(deterministic_runs=False)
    return next(name for name, m in LADDER.items() if m == model)


def profiled_kernels(case: Case, target: Any, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """The target's outputs and the CUDA kernels one call launched."""
    (got, error), names = launched_kernels(lambda: run_kernel(case, target, inputs))
    return {"got": got, "error": error, "kernels": names}


def references(case: Case, inputs: dict[str, np.ndarray], models: dict[str, Any]) -> dict:
    import cupy  # noqa: PLC0415 - GPU only

    op = get_op("conv2d")
    where = {k: cupy.asarray(v) for k, v in inputs.items()}
    return {name: {k: v.to_host() for k, v in op.reference(where, case.params, m,
                                                           OUTPUTS).items()}
            for name, m in models.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--cases", type=int, default=1, help="normal-family cases per layer")
    ap.add_argument("--nets", default="resnet18,unet")
    ap.add_argument("--seconds", type=float, default=480.0, help="stop after this long")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    import torch  # noqa: PLC0415

    device = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN "
              f"{torch.backends.cudnn.version()}, {platform.node()}")
    targets = [get_target(t, "conv2d") for t in TARGETS]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for net in a.nets.split(","):
        for layer, cin, cout, size, k, stride in NETS[net]:
            if time.perf_counter() - t0 > a.seconds:
                break
            params = {"batch": a.batch, "in_channels": cin, "out_channels": cout,
                      "height": size, "width": size, "kernel_size": k, "stride": stride,
                      "padding": k // 2, "bias": False}
            fams = [("normal", s) for s in range(a.cases)] + [("exact", 0)]
            stats: dict[tuple[str, str], dict[str, Any]] = {}
            for family, seed in fams:
                case = Case("conv2d", params, family=family, seed=seed)
                inputs = case.inputs()
                refs = references(case, inputs, LADDER)  # the claims are among them
                for target in targets:
                    claim = claimed_rung(target)
                    res = profiled_kernels(case, target, inputs)
                    if res["error"]:
                        raise SystemExit(f"{target.name} on {net} {layer}: {res['error']}")
                    for name in OUTPUTS:
                        got = res["got"][name]
                        st = stats.setdefault((target.name, name), {
                            "det": 0.0, "prob": 0.0, "ladder": dict.fromkeys(LADDER, 0.0),
                            "kernels": set(), "exact_bitwise": None, "exact_pass": None})
                        verdicts = {lname: compare(name, got, refs[lname][name])
                                    for lname in LADDER}
                        claimed = verdicts[claim]
                        if family == "exact":
                            st["exact_bitwise"] = bool(np.array_equal(
                                np.asarray(got, np.float64), refs["fp32"][name].value))
                            st["exact_pass"] = claimed.passed
                        st["det"] = max(st["det"], claimed.worst_ratio_det)
                        st["prob"] = max(st["prob"], claimed.worst_ratio_prob)
                        for lname, v in verdicts.items():
                            st["ladder"][lname] = max(st["ladder"][lname], v.worst_ratio_det)
                        st["kernels"].update(res["kernels"])
            for (tname, name), st in stats.items():
                eff = next((n for n, r in st["ladder"].items() if r < 1.0), "none")
                row = {"net": net, "layer": layer, "target": tname, "output": name,
                       "shape": f"{a.batch}x{cin}x{size}x{size} k{k} s{stride} -> {cout}",
                       "cases": len(fams), "worst_det": st["det"], "worst_prob": st["prob"],
                       "effective": eff, "ladder": st["ladder"],
                       "algorithm": algorithm_of(sorted(st["kernels"])),
                       "kernels": sorted(st["kernels"]),
                       "exact_bitwise": st["exact_bitwise"], "exact_pass": st["exact_pass"]}
                rows.append(row)
                print(f"{net:8s} {layer:18s} {tname:20s} {name:11s} det {st['det']:.3g} "
                      f"prob {st['prob']:.3g} eff {eff:18s} {row['algorithm']:14s} "
                      f"exact bitwise {st['exact_bitwise']}", flush=True)
            write(a.out, rows, device, a, time.perf_counter() - t0)


def write(out: Path, rows: list[dict[str, Any]], device: str, a: argparse.Namespace,
          seconds: float) -> None:
    (out / "cudnn_layers.json").write_text(json.dumps(
        {"device": device, "batch": a.batch, "cases": a.cases, "seconds": round(seconds, 1),
         "rows": rows}, indent=1))
    lines = ["# cuDNN on real conv2d layers: precision and algorithm per output", "",
             f"`python benchmarks/cudnn_layers.py --batch {a.batch} --cases {a.cases}` on "
             f"{device} ({seconds:.0f} s). Per layer: {a.cases} normal-family cases and one "
             "exact-family case. *det*/*prob*: worst err/bound under the model the target "
             "claims (its formats and every algorithm class cuDNN may choose); *effective*: "
             "the most precise explanation holding on every case; *algorithm*: from the "
             "names of the CUDA kernels the calls launched; *exact bitwise*: the "
             "exact-family output equals the exact result (a summation ran).", "",
             "| net | layer | shape | target | output | det | prob | effective | algorithm | "
             "exact bitwise | exact within claim |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['net']} | {r['layer']} | {r['shape']} | {r['target']} | "
                     f"{r['output']} | {r['worst_det']:.3g} | {r['worst_prob']:.3g} | "
                     f"{r['effective']} | {r['algorithm']} | {r['exact_bitwise']} | "
                     f"{r['exact_pass']} |")
    (out / "cudnn_layers.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
