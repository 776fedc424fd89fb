"""Check the Fortran conv2d kernel (column-major arrays, bind(c)).

    python examples/fortran/check_conv2d.py [--bug | --bug-read]

--bug: grad_weight written in cuDNN's row-major order; --bug-read: the weights
read in that order (seed 000's layout trap, both sides).
"""

import subprocess
import sys
from pathlib import Path

from numoracle.foreign import run, shared_library_target

HERE = Path(__file__).resolve().parent
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_weight", "grad_bias",
        "batch", "in_channels", "out_channels", "height", "width",
        "kernel_size[0]", "kernel_size[1]", "stride[0]", "stride[1]",
        "padding[0]", "padding[1]", "dilation[0]", "dilation[1]", "groups", "param:bias"]
# every array is a Fortran array in the op's axis order: column-major
LAYOUTS = {"x": "NCHW:F", "weight": "OIHW:F", "grad_output": "NCHW:F",
           "y": "NCHW:F", "grad_weight": "OIHW:F"}


def build(out_dir: Path, bug: bool | str = False) -> Path:
    """Build the library; ``bug``: True or "PLANTED_BUG", or "PLANTED_BUG_READ"."""
    define = "PLANTED_BUG" if bug is True else bug
    lib = out_dir / (f"libconv2d_bug_{define}.so" if define else "libconv2d.so")
    subprocess.run(["gfortran", "-O2", "-shared", "-fPIC", "-J", str(out_dir),
                    *([f"-D{define}"] if define else []), str(HERE / "conv2d.F90"),
                    "-o", str(lib)], check=True)
    return lib


def target(lib: Path, spec_dir: Path | None = None):
    return shared_library_target(lib, "conv2d_f32", op="conv2d", precision="fp32",
                                 args=ARGS, layouts=LAYOUTS, spec_dir=spec_dir,
                                 name="fortran-conv2d" + ("-bug" if "bug" in lib.name else ""))


if __name__ == "__main__":
    # built where it stays: a repro's spec names the library, and replay loads it again
    out = Path("build") / "examples"
    out.mkdir(parents=True, exist_ok=True)
    bug = "PLANTED_BUG" if "--bug" in sys.argv else \
        "PLANTED_BUG_READ" if "--bug-read" in sys.argv else False
    res = run(target(build(out, bug=bug)), examples=200)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")
