#!/usr/bin/env bash
# Problems 3-10 of the user's loop, each as a short command, against the numoracle
# checkout given (put first on PYTHONPATH). Usage: problems.sh CHECKOUT; runs in a
# scratch folder and prints each command, its output (cut) and its exit status.
set -u
checkout=$(cd "$1" && pwd)
py=${PYTHON:-python}
work=$(mktemp -d)
cd "$work"
export PYTHONPATH="$checkout" COLUMNS=120
say() { printf '\n$ %s\n' "$*"; "$@" > out.txt 2>&1; local s=$?; cut -c1-150 out.txt | head -${LINES_SHOWN:-12}; echo "[exit $s; $(wc -l < out.txt) lines]"; }

echo "== 3. the install reason"
grep -n -A3 'torch==2.13.0` ' "$checkout/README.md" | head -6

cat > mykernels.py <<'PY'
import numpy as np
def matmul(a, b):
    return {"out": np.matmul(a, b)}
PY
echo; echo "== 4. run --kernel without --reference"
say numoracle run --kernel mykernels:matmul --targets numpy-fp32 --ops matmul --budget 3 -j 1
echo; echo "== 5. a reference from the working folder, and as file.py:fn"
printf 'import torch\ndef act(x):\n    return torch.tanh(x)\n' > refs.py
printf 'import torch\ndef act(x):\n    return {"out": torch.tanh(x)}\n' > mine.py
say numoracle run --reference refs:act --inputs x=batch,n --dims n=1:8 --kernel mine:act --examples 10 --budget 10
say numoracle run --reference refs.py:act --inputs x=batch,n --dims n=1:8 --kernel mine.py:act --examples 10 --budget 10
echo; echo "== 6. two lambda references"
say "$py" -c "
import torch
from numoracle.oracle.traced.op import traced_op
a = traced_op(lambda x: torch.softmax(x, -1), inputs={'x': ('n',)})
print(a.name)
b = traced_op(lambda x: torch.relu(x), inputs={'x': ('n',)})
print(b.name)"
echo; echo "== 7. a passing result printed; starved rows"
say "$py" -c "
import numpy as np, numoracle
r = numoracle.check_kernel(lambda a, b: {'out': a @ b}, op='matmul', examples=10, store=None)
print(len(repr(r)), 'characters of repr;', len(str(r)), 'of str:')
print(r)"
LINES_SHOWN=3 say numoracle run --targets numpy-fp32 --ops conv2d,kan,kan_chain,logic_ca,mlp_train --budget 2 -j 1
tail -1 out.txt | cut -c1-220
echo; echo "== 8. raw tracebacks"
touch afile
LINES_SHOWN=4 say numoracle cases --op matmul --out afile
numoracle cases --op matmul --examples 2 --out cs > /dev/null 2>&1
mkdir -p repdir
LINES_SHOWN=4 say numoracle judge cs --report repdir
cat > test_v.py <<'PY'
import numoracle
def bias_twice(x, weight, grad_output, bias=None):
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + 2 * bias
        out["grad_bias"] = grad_output.sum(axis=0)
    out["y"] = y
    return out
test_bias = numoracle.validate(op="linear", examples=20, store=None)(bias_twice)
PY
"$py" -m pytest -q -p no:cacheprovider -p no:randomly test_v.py > pytest.txt 2>&1
echo "a failing validate test under pytest: $(grep -c '^    \|^>' pytest.txt) lines of source shown, from $(grep -o '[a-z_/]*numoracle/[a-z_/]*\.py' pytest.txt | sort -u | tr '\n' ' ')"
cat > crash.py <<'PY'
import ctypes
import numoracle
def segfault(a, b):
    ctypes.string_at(0)
if __name__ == "__main__":
    try:
        numoracle.check_kernel(segfault, op="matmul", examples=3, store=None, isolate=True,
                               max_elements=16)
    except numoracle.KernelMismatch as failure:
        print(str(failure).splitlines()[2][:200])
PY
LINES_SHOWN=6 say "$py" crash.py
echo; echo "== 9. numoracle list: the ops' inputs"
numoracle list > list.txt 2>&1
grep -A4 '┃ op ' list.txt | cut -c1-120
grep '│ logic_layer' -A4 list.txt | cut -c1-120
echo; echo "== 10. licence and changelog"
ls "$checkout" | grep -i -E 'license|changelog' || echo "(none)"
rm -rf "$work"
