"""The error-tracking core's closed interface: its constructors, and no module
outside it building a ``Tracked`` field by field or reaching into its privates."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import numoracle
from numoracle.errors import InvalidArgument
from numoracle.oracle.precision import get_model
from numoracle.oracle.tracked import (
    bounded,
    exact,
    mul_scalar,
    negated,
    scaled_exactly,
    store,
)

PACKAGE = Path(numoracle.__file__).parent
CORE = {PACKAGE / "oracle" / "tracked.py"}


def _sources() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py")) if p not in CORE]


def test_no_tracked_built_outside_the_core() -> None:
    built = [f"{p.relative_to(PACKAGE)}:{node.lineno}" for p, tree in _sources()
             for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id == "Tracked"]
    assert not built, f"Tracked(...) built outside the core (use exact/bounded/tmap): {built}"


def test_no_private_name_of_the_core_imported() -> None:
    private = [f"{p.relative_to(PACKAGE)}:{node.lineno} {a.name}" for p, tree in _sources()
               for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("tracked")
               for a in node.names if a.name.startswith("_")]
    assert not private, f"private names of the core imported: {private}"


def test_bounded_fills_the_defaults_as_float64_arrays() -> None:
    t = bounded([1.0, -2.0], np.array([0.5, 0.25]))
    assert t.value.dtype == np.float64 and t.det.dtype == np.float64
    np.testing.assert_array_equal(t.mag, [1.0, 2.0])
    np.testing.assert_array_equal(t.ref_err, [0.0, 0.0])
    np.testing.assert_array_equal(t.prob, t.det)
    assert t.prob is not t.det  # radii are rounded in place: no shared array
    assert t.n == 1 and t.lo is None


def test_bounded_radii_are_rounded_once_each() -> None:
    r = np.array([1e-3, 2e-3])
    t = store(bounded([1.0, 3.0], r.copy()), get_model("bf16"))
    apart = store(bounded([1.0, 3.0], r.copy(), r.copy()), get_model("bf16"))
    assert (t.det > r).all()
    # not rounded twice through one array
    np.testing.assert_array_equal(t.det, apart.det)
    np.testing.assert_array_equal(t.prob, apart.prob)


def test_negated_is_exact() -> None:
    t = bounded([1.0, -3.0], [0.5, 0.0], [0.25, 0.0])
    n = negated(t)
    np.testing.assert_array_equal(n.value, [-1.0, 3.0])
    assert n.det is t.det and n.prob is t.prob and n.ref_err is t.ref_err


def test_scaled_exactly_scales_the_radii_and_refuses_other_factors() -> None:
    t = bounded([1.5, -3.0], [0.5, 0.125])
    s = scaled_exactly(t, -4.0)
    np.testing.assert_array_equal(s.value, [-6.0, 12.0])
    np.testing.assert_array_equal(s.det, [2.0, 0.5])
    # the same as the general product by an exact factor, which finds it exact too
    m = mul_scalar(exact(t.value), -4.0, get_model("fp32"))
    np.testing.assert_array_equal(m.value, s.value)
    np.testing.assert_array_equal(m.det, [0.0, 0.0])
    with pytest.raises(InvalidArgument, match=r"c=3\.0 is not a power of two"):
        scaled_exactly(t, 3.0)
