#!/usr/bin/env bash
# The user's loop, as a user types it: a check fails, the kernel is fixed in its
# file, `numoracle replay` and `numoracle store prune --fixed` run it again.
# Three kernels: one checked by check_kernel, one shrunk by `shrink --fn`, one
# run by `run --kernel` against a reference. Usage: loop.sh CHECKOUT (the
# numoracle checkout put first on PYTHONPATH); runs in a scratch folder.
set -u
checkout=$(cd "$1" && pwd)
py=${PYTHON:-python}
work=$(mktemp -d)
cd "$work"
export PYTHONPATH="$checkout" COLUMNS=120
say() { printf '\n$ %s\n' "$*"; "$@" 2>&1 | cut -c1-160; echo "[exit ${PIPESTATUS[0]}]"; }

cat > mykernels.py <<'PY'
def layer(x, weight, grad_output, bias=None):
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + 2 * bias          # the bug: the bias added twice
        out["grad_bias"] = grad_output.sum(axis=0)
    out["y"] = y
    return out
PY
cat > check.py <<'PY'
import numoracle
from mykernels import layer
if __name__ == "__main__":
    try:
        print(numoracle.check_kernel(layer, op="linear", examples=50))
    except numoracle.KernelMismatch as failure:
        print(str(failure).splitlines()[0], "...", str(failure).splitlines()[-1], sep="\n")
PY
fix() { sed -i 's/y + 2 \* bias          # the bug: the bias added twice/y + bias/' "$1"; }

echo "== 1. check_kernel"
say "$py" check.py
repro=$(ls -d .numoracle/repros/layer-linear-* | head -1)
say numoracle replay "$repro"
fix mykernels.py
say numoracle replay "$repro"
say "$py" check.py
say numoracle store prune --fixed

echo; echo "== 2. shrink --fn"
cp mykernels.py fixed_backup.py
sed -i 's/y = y + bias/y = y + 2 * bias          # the bug: the bias added twice/' mykernels.py
"$py" -c "
import numpy as np
r = np.random.default_rng(0)
f = lambda *s: r.integers(-2, 3, s).astype(np.float32)
np.savez('step.npz', x=f(64, 32), weight=f(16, 32), grad_output=f(64, 16), bias=f(16))"
say numoracle shrink step.npz --op linear --fn mykernels.py:layer
repro=$(ls -d .numoracle/repros/layer-linear-* | head -1)
fix mykernels.py
say numoracle replay "$repro"
say numoracle store prune --fixed

echo; echo "== 3. run --kernel against --reference (a module of the working folder and a file)"
cat > refs.py <<'PY'
import torch
def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")
PY
cat > act.py <<'PY'
import torch
def gelu(x):
    return {"out": torch.nn.functional.gelu(x)}   # the bug: exact erf GELU, not tanh
PY
say numoracle run --reference refs:gelu_tanh --inputs 'x=batch,n' --dims n=1:64 --kernel act.py:gelu --examples 50 --budget 20
repro=$(ls -d .numoracle/repros/gelu-traced_gelu_tanh-* | head -1)
sed -i 's/torch.nn.functional.gelu(x)}   # the bug: exact erf GELU, not tanh/torch.nn.functional.gelu(x, approximate="tanh")}/' act.py
say numoracle replay "$repro"
say numoracle store prune --fixed

echo; echo "== 4. a kernel that cannot be found again"
"$py" -c "
import numoracle
try:
    numoracle.check_kernel(lambda a, b: {'out': a @ b + 1}, op='matmul', examples=20)
except numoracle.KernelMismatch as f:
    print(str(f).splitlines()[0])"
repro=$(ls -d .numoracle/repros/*-matmul-* | head -1)
say numoracle replay "$repro"
say numoracle replay --recorded "$repro"
rm -rf "$work"
