"""Check the C matmul kernel: build it, point numoracle at the symbol.

    python examples/c/check_matmul.py [--bug]
"""

import subprocess
import sys
from pathlib import Path

from numoracle.foreign import run, shared_library_target

HERE = Path(__file__).resolve().parent


def build(out_dir: Path, bug: bool = False) -> Path:
    lib = out_dir / ("libmatmul_bug.so" if bug else "libmatmul.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *(["-DPLANTED_BUG"] if bug else []),
                    str(HERE / "matmul.c"), "-o", str(lib)], check=True)
    return lib


def target(lib: Path, spec_dir: Path | None = None):
    return shared_library_target(
        lib, "matmul_f32", op="matmul", precision="fp32",
        args=["a", "b", "out", "prod(batch_shape)", "m", "k", "n"],
        name="c-matmul" + ("-bug" if "bug" in lib.name else ""), spec_dir=spec_dir)


if __name__ == "__main__":
    # built where it stays: a repro's spec names the library, and replay loads it again
    out = Path("build") / "examples"
    out.mkdir(parents=True, exist_ok=True)
    t = target(build(out, bug="--bug" in sys.argv))
    res = run(t, examples=200)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")
