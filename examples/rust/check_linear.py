"""Check the Rust linear layer (a cdylib built by rustc, no cargo).

    python examples/rust/check_linear.py [--bug]
"""

import subprocess
import sys
from pathlib import Path

from numoracle.foreign import run, shared_library_target

HERE = Path(__file__).resolve().parent
ARGS = ["x", "weight", "bias", "grad_output", "y", "grad_input", "grad_weight", "grad_bias",
        "batch", "in_features", "out_features"]


def build(out_dir: Path, bug: bool = False) -> Path:
    lib = out_dir / ("liblinear_bug.so" if bug else "liblinear.so")
    subprocess.run(["rustc", "--edition", "2021", "--crate-type", "cdylib", "-C", "opt-level=2",
                    *(["--cfg", "planted_bug"] if bug else []), str(HERE / "linear.rs"),
                    "-o", str(lib)], check=True)
    return lib


def target(lib: Path, spec_dir: Path | None = None):
    return shared_library_target(lib, "linear_f32", op="linear", precision="fp32", args=ARGS,
                                 spec_dir=spec_dir,
                                 name="rust-linear" + ("-bug" if "bug" in lib.name else ""))


if __name__ == "__main__":
    # built where it stays: a repro's spec names the library, and replay loads it again
    out = Path("build") / "examples"
    out.mkdir(parents=True, exist_ok=True)
    res = run(target(build(out, bug="--bug" in sys.argv)), examples=200)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")
