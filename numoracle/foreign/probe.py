"""The layout probe: is a failure a layout mix-up, and which layout?

A kernel that reads or writes an array in another memory layout than the one
declared (seed 000: a Fortran program holding weights as ``w(out, in, kh, kw)``,
column-major, handed to a kernel that reads row-major ``OIHW``) produces values
that are exactly right for *misread* data. The probe re-judges a failing case
under every other layout of each array: an input whose declared bytes, read in
layout ``L``, explain every failing output; or an output whose bytes, read as
written in layout ``L``, pass. It names the layout.

Examples
--------
>>> import numpy as np
>>> a = np.arange(6.0).reshape(2, 3)
>>> misread(a, None, "C", "F").tolist()  # row-major bytes read as column-major
[[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from ..cases.case import Case
from ..cases.layouts import from_order, layouts_for, normalize, parse, shape_in, to_order
from ..checking.check import judge
from ..oracle.ops import get_op
from ..oracle.precision import PrecisionModel

__all__ = ["misread", "layout_diagnosis", "alternatives"]


def _mem(memory: str) -> Literal["C", "F"]:
    return "F" if memory == "F" else "C"


def misread(arr: np.ndarray, axes: str | None, declared: str, read_as: str) -> np.ndarray:
    """The canonical array a program sees when it reads the memory of ``arr``
    laid out in ``declared`` as if it were laid out in ``read_as``."""
    d = parse(declared, axes)
    flat = np.asarray(to_order(arr, axes, d.order)).ravel(order=_mem(d.memory))
    r = parse(read_as, axes)
    shape = shape_in(tuple(arr.shape), axes, r.order)
    return np.ascontiguousarray(from_order(flat.reshape(shape, order=_mem(r.memory)),
                                           axes, r.order))


def alternatives(declared: str, axes: str | None) -> list[str]:
    """The other row- or column-major layouts of an array declared ``declared``."""
    want = normalize(declared, axes)
    seen = {want}
    out = []
    for lay in layouts_for(axes):
        if lay in ("T", "S"):
            continue
        n = normalize(lay, axes)
        if n not in seen:
            seen.add(n)
            out.append(lay)
    return out


def _passes(case: Case, model: PrecisionModel, inputs: Mapping[str, np.ndarray],
            got: Mapping[str, np.ndarray]) -> bool:
    with np.errstate(all="ignore"):
        verdicts = judge(case, model, inputs, got, with_diagnosis=False)
    return all(v.passed for v in verdicts.values())


def layout_diagnosis(case: Case, model: PrecisionModel, inputs: Mapping[str, np.ndarray],
                     got: Mapping[str, np.ndarray], declared: Mapping[str, str]) -> str:
    """A sentence naming the layout a failure is consistent with, or ``""``.

    Parameters
    ----------
    case, model : Case, PrecisionModel
        The failing case and the claimed model.
    inputs, got : mapping of str to array
        The case's inputs and the outputs the kernel returned (canonical axis order).
    declared : mapping of str to str
        The layout each array was handed over or read back in (arrays left out: ``C``).
    """
    op = get_op(case.op)
    with np.errstate(all="ignore"):
        verdicts = judge(case, model, inputs, got, with_diagnosis=False)
    failing = {k: got[k] for k, v in verdicts.items() if not v.passed}
    if not failing:
        return ""
    found = []
    for name, arr in failing.items():  # an output written in another layout
        axes = op.output_axes.get(name)
        decl = declared.get(name, "C")
        for lay in alternatives(decl, axes):
            fixed = misread(arr, axes, decl, lay)
            if not np.array_equal(fixed, arr, equal_nan=True) and \
                    _passes(case, model, inputs, {name: fixed}):
                found.append(f"{name} is right once its memory is read in layout "
                             f"{normalize(lay, axes)!r}: the kernel writes {name} as "
                             f"{normalize(lay, axes)}, but it is declared "
                             f"{normalize(decl, axes)!r}")
                break
    for name in inputs:  # an input read in another layout
        axes = op.input_axes.get(name)
        decl = declared.get(name, "C")
        for lay in alternatives(decl, axes):
            changed = dict(inputs)
            changed[name] = misread(inputs[name], axes, decl, lay)
            if not np.array_equal(changed[name], inputs[name], equal_nan=True) and \
                    _passes(case, model, changed, failing):
                found.append(f"{sorted(failing)} are right for {name} read in layout "
                             f"{normalize(lay, axes)!r}: the kernel reads {name} as "
                             f"{normalize(lay, axes)}, but it is declared "
                             f"{normalize(decl, axes)!r}")
                break
    if not found:
        return ""
    head = "layout mix-up" if len(found) == 1 else "layout mix-up (this case fits each)"
    return (f"{head}: " + "; or ".join(found)
            + "; fix the kernel's indexing or declare the layout it uses")


def declared_layouts(fn: Any) -> dict[str, str]:
    """The layouts a foreign target's function declares (empty for other targets)."""
    spec = getattr(fn, "foreign_spec", None)
    return dict(spec.layouts) if spec is not None else {}
