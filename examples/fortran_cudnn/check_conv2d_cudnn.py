"""Check the Fortran program that calls cuDNN on the GPU (conv2d forward, backward
data, backward filter, bias gradient), as a shared-library target.

    examples/fortran_cudnn/build.sh build/fortran_cudnn
    python examples/fortran_cudnn/check_conv2d_cudnn.py [--variant V] [--examples N]

Variants (see conv2d_cudnn.F90): ``correct``; ``layout_trap_grad`` (seed 000:
grad_weight copied back as cuDNN wrote it, "not transformed like the weights");
``layout_trap`` (the weights declared ``(out, in, k, k)`` in column-major
Fortran handed to cuDNN untransposed). The program holds its weights as
``OIHW:F`` and every other array as cuDNN's row-major NCHW.

The CUDA runtime and cuDNN are found at run time (the NVIDIA wheels of the
Python environment, then the system's sonames) and handed to the program in
``NUMORACLE_CUDART`` and ``NUMORACLE_CUDNN``.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import site
import sys
from pathlib import Path

from numoracle.targets.target import Target
from numoracle.foreign import run, shared_library_target

HERE = Path(__file__).resolve().parent
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_input", "grad_weight", "grad_bias",
        "batch", "in_channels", "out_channels", "height", "width",
        "kernel_size[0]", "kernel_size[1]", "stride[0]", "stride[1]",
        "padding[0]", "padding[1]", "dilation[0]", "dilation[1]", "groups", "param:bias"]
#: the weights as the Fortran model declares them; the rest in cuDNN's NCHW
LAYOUTS = {"weight": "OIHW:F", "grad_weight": "OIHW:F"}
VARIANTS = {"correct": "libconv2d_cudnn.so", "layout_trap": "libconv2d_cudnn_layout_trap.so",
            "layout_trap_grad": "libconv2d_cudnn_layout_trap_grad.so"}


def _candidates(pattern: str) -> list[str]:
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    found: list[str] = []
    for root in dict.fromkeys(r for r in roots if r and os.path.isdir(r)):
        found += sorted(glob.glob(os.path.join(root, "nvidia", "**", pattern), recursive=True))
    return found


def find_libraries() -> dict[str, str]:
    """The CUDA runtime and cuDNN libraries to load: the environment's choice, the
    NVIDIA wheels of this Python, or the sonames (the loader's search path)."""
    out = {}
    for var, patterns, soname in (
            ("NUMORACLE_CUDART", ("libcudart.so.*",), "libcudart.so"),
            ("NUMORACLE_CUDNN", ("libcudnn.so.*",), "libcudnn.so.9")):
        if os.environ.get(var):
            out[var] = os.environ[var]
            continue
        hits = [h for p in patterns for h in _candidates(p)]
        hits += sorted(glob.glob(f"/usr/local/cuda/lib64/{patterns[0]}"))
        out[var] = hits[-1] if hits else soname
        os.environ[var] = out[var]
    return out


def target(variant: str = "correct", libdir: Path | str = "build/fortran_cudnn",
           spec_dir: Path | str | None = None) -> Target:
    """The shared-library target of a variant built into ``libdir``."""
    libdir = Path(libdir)
    for dep in ("libquadmath.so.0", "libgfortran.so.5"):  # the carried Fortran runtime
        if (libdir / dep).is_file():
            ctypes.CDLL(str((libdir / dep).resolve()), mode=ctypes.RTLD_GLOBAL)
    return shared_library_target(libdir / VARIANTS[variant], "conv2d_cudnn", op="conv2d",
                                 precision="fp32", args=ARGS, layouts=LAYOUTS,
                                 returns="status", isolate=False, spec_dir=spec_dir,
                                 name=f"fortran-cudnn-conv2d-{variant}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="correct")
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--libdir", default="build/fortran_cudnn")
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args()
    libs = find_libraries()
    print("libraries:", libs)
    res = run(target(args.variant, args.libdir), examples=args.examples)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "variant": args.variant, "libraries": libs, "verdict": res.verdict,
            "cases": res.cases, "worst_ratio": res.worst_ratio, "diagnosis": res.diagnosis,
            "repro_shape": res.repro_shape, "message": res.message}, indent=2, default=str))


if __name__ == "__main__":
    main()
