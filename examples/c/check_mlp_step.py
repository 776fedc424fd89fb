"""Check a C training step through a shared library: one SGD step of a ReLU
MLP whose parameters are read and updated in place (in-out arrays), the
learning rate passed as a float, called once per step of each case.

    python examples/c/check_mlp_step.py [--bug]

``--bug`` builds the per-sample-update version (the parameters move after every
sample of a batch instead of once per batch): numoracle fails it on the
parameters after the first step and shrinks it to a batch of two samples.
"""

import subprocess
import sys
from pathlib import Path

from numoracle.foreign import run, shared_library_target

HERE = Path(__file__).resolve().parent

#: the C arguments in order: arrays by the op's names (w1 ... b3 are updated in
#: place), the sizes as C ints, the learning rate as a C float
ARGS = ["x", "labels", "w1", "b1", "w2", "b2", "w3", "b3", "loss",
        "batch", "in_features", "hidden1", "hidden2", "classes", "lr:float32"]
#: what the kernel implements: plain SGD (cases with other optimizers are not drawn)
FIXED = {"optimizer": "sgd", "momentum": 0.0, "weight_decay": 0.0}


def build(out_dir: Path, bug: bool = False) -> Path:
    lib = out_dir / ("libmlp_step_bug.so" if bug else "libmlp_step.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC",
                    *(["-DPER_SAMPLE_UPDATE"] if bug else []),
                    str(HERE / "mlp_step.c"), "-o", str(lib), "-lm"], check=True)
    return lib


def target(lib: Path, spec_dir: Path | None = None):
    return shared_library_target(
        lib, "mlp_sgd_step", op="mlp_train", precision="fp32", args=ARGS, params=FIXED,
        name="c-mlp-step" + ("-bug" if "bug" in lib.name else ""), spec_dir=spec_dir)


if __name__ == "__main__":
    # built where it stays: a repro's spec names the library, and replay loads it again
    out = Path("build") / "examples"
    out.mkdir(parents=True, exist_ok=True)
    t = target(build(out, bug="--bug" in sys.argv))
    res = run(t, examples=100)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")
