"""Kernels with a planted bug in a file of their own, and stored repros damaged the
ways a user damages them: what the mistakes benchmark and the clean-error tests
both start from.

:func:`kernels_source` is the text of a kernel file defining linear targets (by
name: ``bias_twice`` adds its bias twice; ``stale_after_three`` is right for its
first three calls, then off by one, a bug only earlier calls show).
:func:`damage` breaks a copy of a repro folder in one of :data:`DAMAGES`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["DAMAGES", "KERNEL_NAMES", "damage", "kernels_source"]

_KERNELS = '''
from numoracle.targets.target import Target
from numoracle.oracle.precision import get_model

CALLS = [0]

def bias_twice(x, weight, grad_output, bias=None):
    y = x @ weight.T + (0 if bias is None else 2 * bias)
    out = {{"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def stale_after_three(x, weight, grad_output, bias=None):
    """Correct for its first three calls, then y is off by one: a bug only earlier calls show."""
    CALLS[0] += 1
    y = x @ weight.T + (0 if bias is None else bias) + (1.0 if CALLS[0] > 3 else 0.0)
    out = {{"y": y, "grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}}
    if bias is not None:
        out["grad_bias"] = grad_output.sum(0)
    return out

def _t(name, fn):
    return Target(name=name, op="linear", backend="numpy", precision=get_model("fp32"), fn=fn,
                  available=lambda: None, source=__file__)

TARGETS = [_t(name, globals()[name]) for name in {names!r}]
'''

#: the kernels :func:`kernels_source` can define
KERNEL_NAMES = ("bias_twice", "stale_after_three")


def kernels_source(names: Sequence[str] = KERNEL_NAMES) -> str:
    """The text of a kernel file whose ``TARGETS`` are the linear kernels ``names``."""
    unknown = sorted(set(names) - set(KERNEL_NAMES))
    if unknown:
        raise ValueError(f"names={list(names)!r}: {unknown} are not among the planted "
                         f"kernels; choose from {KERNEL_NAMES}")
    return _KERNELS.format(names=list(names))


def _source_gone(folder: Path) -> None:
    meta = json.loads((folder / "repro.json").read_text())
    meta["target"]["source"] = str(folder.parent / "deleted.py")
    (folder / "repro.json").write_text(json.dumps(meta))


def _npz_gone(folder: Path) -> None:
    (folder / "arrays.npz").unlink()


def _npz_and_source_gone(folder: Path) -> None:
    _source_gone(folder)
    _npz_gone(folder)


def _write(name: str, text: str) -> Callable[[Path], object]:
    def write(folder: Path) -> object:
        return (folder / name).write_text(text)
    return write


#: damage -> what it does to a repro folder (the kernel's file "deleted" is a path beside
#: the folder that does not exist)
DAMAGES: dict[str, Callable[[Path], object]] = {
    "corrupt_json": _write("repro.json", '{"case": {"op": "linear", '),
    "empty_json": _write("repro.json", "{}"),
    "corrupt_npz": _write("arrays.npz", "not a zip"),
    "npz_gone": _npz_gone,
    "source_gone": _source_gone,
    "npz_and_source_gone": _npz_and_source_gone,
}


def damage(repro: Path, into: Path, how: str) -> Path:
    """A copy of the repro folder ``repro`` at ``into``, damaged as ``how`` says (a key of
    :data:`DAMAGES`); returns ``into``."""
    if how not in DAMAGES:
        raise ValueError(f"how={how!r} is not a damage; choose from {sorted(DAMAGES)}")
    shutil.copytree(repro, into)
    DAMAGES[how](into)
    return into
