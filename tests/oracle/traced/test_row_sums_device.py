"""The device's tracked row sum (``ROW_SUM`` and ``ROW_SUM_RADII`` in
``numoracle/oracle/_rows_cuda.py``, run by ``fused_cuda.row_sums`` for ``tracked.sum_``
over the last axis on CuPy) against the contraction with a vector of ones it stands for.

On the host the kernels' C text is compiled by g++ (``rows_harness``) and ``sum_`` runs
through it on NumPy arrays. Where every sum is exact (values and radii on a coarse
grid) each field is the NumPy path's bit for bit, whatever the order of the sums: the
radii's arithmetic, the exact regime, the overflow, the escalation left to the
contraction. Elsewhere the value and ``S`` are the sequential sums of NumPy's
``cumsum`` bit for bit (one thread per row, the rows in order) and every field lies
within the float64 reassociation of the NumPy path's. Mutated kernels are caught. On a
GPU (``gpu``-marked) CuPy's build gives the host's bits with as many threads, and
``sum_`` on CuPy with the kernels on lies within the oracle's own error of the NumPy path.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
import rows_harness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rules_backends import _same_tracked, table_case

from numoracle.oracle import _rows_cuda as src
from numoracle.oracle import fused, fused_cuda, tracked
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, bounded, exact, sum_

host_kernels = pytest.mark.skipif(shutil.which("g++") is None,
                                  reason="the host's build of the device kernels needs g++")

MODELS = ("fp32", "bf16", "fp16", "tf32", "fp64")
FIELDS = ("value", "det", "prob", "ref_err", "mag")


class _Route:
    """``sum_`` through the row kernels (``build`` making them) or through the contraction,
    the row kernels' calls and their answers counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mp = monkeypatch
        self.calls: list[bool] = []
        real = fused_cuda.row_sums

        def counted(*a: Any) -> Any:
            out = real(*a)
            self.calls.append(out is not None)
            return out
        monkeypatch.setattr(fused_cuda, "row_sums", counted)
        monkeypatch.setattr(tracked, "SINGLE_SUMS", False)  # (S in float64, as the kernel's)

    def kernels(self, t: Tracked, model: Any, build: Callable[..., Any] = rows_harness.build,
                stored: bool = False) -> Tracked:
        self.mp.setattr(fused_cuda, "_BUILT", {})
        self.mp.setattr(fused_cuda, "build", build)
        self.mp.setattr(tracked, "device_row_sums", lambda xp: True)
        with np.errstate(all="ignore"):
            return sum_(t, -1, model, stored=stored)

    def contraction(self, t: Tracked, model: Any, stored: bool = False) -> Tracked:
        self.mp.setattr(tracked, "device_row_sums", lambda xp: False)
        with np.errstate(all="ignore"):
            return sum_(t, -1, model, stored=stored)


@pytest.fixture
def route(monkeypatch: pytest.MonkeyPatch) -> _Route:
    return _Route(monkeypatch)


def _field(t: Tracked, name: str) -> np.ndarray:
    return np.broadcast_to(np.asarray(getattr(t, name), dtype=np.float64), t.shape)


def _same_bits(got: Tracked, want: Tracked) -> None:
    assert got.shape == want.shape and got.n == want.n
    assert got.escalated == want.escalated and (got.lo is None) == (want.lo is None)
    for name in FIELDS:
        a, b = _field(got, name), _field(want, name)
        assert np.array_equal(a.view(np.int64), b.view(np.int64)), (
            name, np.argwhere(a != b)[:3].tolist(), a[a != b][:3], b[a != b][:3])


def _grid_case(rng: np.random.Generator, shape: tuple[int, ...], radii: str) -> Tracked:
    """Values and radii on grids coarse enough that every sum of them is exact (``tiny``:
    subnormal values, no radii)."""
    v = rng.integers(-2**20, 2**20, shape) * 2.0 ** (
        -1074 if radii == "tiny" else int(rng.integers(-30, 10)))
    v[rng.random(shape) < 0.2] = 0.0
    if radii in ("exact", "tiny"):
        return exact(v)
    d = rng.integers(0, 2**10, shape) * 2.0 ** int(rng.integers(-60, -20))
    if radii == "some":
        d[rng.random(shape) < 0.5] = 0.0
    r = rng.integers(0, 2**10, shape) * 2.0 ** int(rng.integers(-90, -50))
    if radii == "ref only":
        return bounded(v, np.zeros(shape), ref_err=r)
    return bounded(v, d, d * 0.5 if radii == "all" else d, ref_err=r)


@host_kernels
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 5), cols=st.integers(1, 300), lead=st.booleans(),
       radii=st.sampled_from(["exact", "all", "some", "ref only", "tiny"]),
       model=st.sampled_from(MODELS), per_op=st.booleans(), flush=st.booleans(),
       threads=st.sampled_from([1, 4]), stored=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_exact_sums_give_the_contractions_bits(route: _Route, rows: int, cols: int,
                                               lead: bool, radii: str, model: str,
                                               per_op: bool, flush: bool, threads: int,
                                               stored: bool, seed: int) -> None:
    """Every sum exact: the kernels' fields are the NumPy path's, bit for bit (the exact
    regime's zeros, an escalation left to the contraction; ``stored``, the rounding to
    the storage format after)."""
    rng = np.random.default_rng(seed)
    t = _grid_case(rng, (2, rows, cols) if lead else (rows, cols), radii)
    m = get_model(model, rounding="per-op") if per_op else get_model(model)
    if flush:
        m = m.with_(flush_subnormal_inputs=True)
    got = route.kernels(t, m, partial(rows_harness.build, threads=threads), stored)
    want = route.contraction(t, m, stored)
    assert route.calls, "the row kernels were not asked"
    _same_bits(got, want)


def _within_reassociation(got: Tracked, want: Tracked) -> None:
    """Values within the reference's own error of each other; radii and magnitudes (affine
    in sums of non-negative terms) within float64's reassociation of those sums."""
    n = got.n
    for name in FIELDS:
        a, b = _field(got, name), _field(want, name)
        slack = _field(want, "ref_err") if name == "value" else 2.0 * n * 2.0**-53 * np.abs(b)
        assert np.all(np.abs(a - b) <= slack), (name, a[:2], b[:2])


def _normal_case(rng: np.random.Generator, shape: tuple[int, ...]) -> Tracked:
    v = rng.standard_normal(shape) * np.exp(rng.uniform(-3, 3, shape[:-1] + (1,)))
    d = np.abs(v) * 2.0**-20 * rng.random(shape)
    return bounded(v, d, d * 0.25, ref_err=np.abs(v) * 2.0**-52)


@host_kernels
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("shape", [(7, 1), (3, 257), (2, 3, 1000)])
def test_general_sums_are_the_sequential_sums(route: _Route, model: str,
                                              shape: tuple[int, ...]) -> None:
    """Any values: the value and ``S`` are ``cumsum``'s sequential sums bit for bit, each
    field within float64's reassociation of the NumPy path's (its GEMM sums in another
    order), and where the contraction escalates the kernels leave it to it."""
    t = _normal_case(np.random.default_rng(len(shape) + shape[-1]), shape)
    m = get_model(model)
    got = route.kernels(t, m)
    want = route.contraction(t, m)
    if want.escalated:  # (float64 claimed: the reference must be exact there)
        assert route.calls == [False]
        _same_bits(got, want)
        return
    assert route.calls == [True]
    v, d = t.value, t.det
    assert np.array_equal(got.value, np.cumsum(v, axis=-1)[..., -1])
    g64, *_ = tracked._coefficients(tracked._one_length(shape[-1], m), 0.0, m, np)
    grow, tiny = tracked._growth(v, False, g64, shape[-1] * 2.0**-1074)
    s = np.cumsum(np.abs(v), axis=-1)[..., -1] + np.cumsum(d, axis=-1)[..., -1]
    assert np.array_equal(got.mag, s * grow + tiny)
    _within_reassociation(got, want)


@host_kernels
@pytest.mark.parametrize("special", ["nan value", "inf value", "inf det", "nan ref"])
def test_values_not_finite_take_the_contraction(route: _Route, special: str) -> None:
    """A value or radius not finite: the kernels say so and the contraction sums."""
    rng = np.random.default_rng(3)
    t = _normal_case(rng, (4, 50))
    field = {"nan value": "value", "inf value": "value", "inf det": "det",
             "nan ref": "ref_err"}[special]
    getattr(t, field)[2, 7] = np.nan if special.startswith("nan") else np.inf
    got = route.kernels(t, get_model("fp32"))
    assert route.calls == [False]
    _same_bits(got, route.contraction(t, get_model("fp32")))


@host_kernels
def test_few_long_rows_take_the_contraction(route: _Route) -> None:
    """A whole tensor's sum (one long row) is the contraction's: one block would not fill
    the device; as many long rows as blocks fill it take the kernels."""
    t = _normal_case(np.random.default_rng(5), (1, fused_cuda.ROW_SUM_LONGEST + 1))
    got = route.kernels(t, get_model("fp32"))
    assert route.calls == []
    _same_bits(got, route.contraction(t, get_model("fp32")))
    assert fused_cuda.row_sums_fit(fused_cuda.ROW_SUM_FEW, fused_cuda.ROW_SUM_LONGEST + 1)
    assert fused_cuda.row_sums_fit(1, fused_cuda.ROW_SUM_LONGEST)


#: mutations of the two kernels, each a plausible slip
MUTANTS = {
    "radii not propagated": ("ROW_SUM_RADII", "if (rad) { d = d + o[2]; p = p + o[3]; }", ""),
    "S not grown": ("ROW_SUM_RADII", "double s = S * grow;", "double s = S;"),
    "reference error not propagated": ("ROW_SUM_RADII", "if (has_ref) r = r + o[4];", ""),
    "exact regime for any grid": ("ROW_SUM_RADII", "int e = f[1] < none ? f[1] : 0;",
                                  "int e = 0;"),
    "overflow not unbounded": ("ROW_SUM_RADII", "if (s > acc_max || d != d)",
                               "if (d != d)"),
    "escalation not asked": ("ROW_SUM_RADII", "atomicOr(&f[2], 1);", "(void)f;"),
    "a thread's parts lost": ("ROW_SUM", "red[k][t] = red[k][t] + red[k][t + s];",
                              "red[k][t] = red[k][t];"),
    "magnitudes not summed": ("ROW_SUM", "sm = sm + a;", "sm = sm + v;"),
    "det not seen": ("ROW_SUM", "if (d != 0.0) bits |= 2;", ""),
    "the first column skipped": ("ROW_SUM", "long long j = t;", "long long j = t + 1;"),
}


def _mutated(name: str) -> tuple[Any, Any]:
    which, old, new = MUTANTS[name]
    specs = {"ROW_SUM": src.ROW_SUM, "ROW_SUM_RADII": src.ROW_SUM_RADII}
    assert old in specs[which].body, name
    specs[which] = dataclasses.replace(specs[which], body=specs[which].body.replace(old, new))
    return specs["ROW_SUM"], specs["ROW_SUM_RADII"]


def _mutant_cases() -> list[tuple[Tracked, Any]]:
    rng = np.random.default_rng(11)
    big = _grid_case(rng, (3, 40), "all")
    over = bounded(big.value * 2.0**200, big.det * 2.0**200, ref_err=big.ref_err)
    v = rng.standard_normal((2, 30))  # (float64 claimed, a reference error near the bound:
    far = bounded(v, np.abs(v) * 2.0**-50, ref_err=np.abs(v) * 2.0**-53)  # escalated)
    n = rng.integers(-2**20, 2**20, (3, 40)) * 2.0**-40  # (radii as large as the values)
    wide = bounded(n, rng.integers(0, 2**10, n.shape) * 2.0**-30, ref_err=np.abs(n) * 2.0**-50)
    return [(_grid_case(rng, (3, 40), "exact"), get_model("fp32")), (wide, get_model("bf16")),
            (_grid_case(rng, (3, 40), "ref only"), get_model("bf16")),
            (big, get_model("fp32")), (over, get_model("fp16")), (far, get_model("fp64"))]


@host_kernels
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutated_kernels_are_caught(route: _Route, mutant: str) -> None:
    """Each mutation of the kernels' C text gives some case other bits than the NumPy
    path's, where the kernels as written give the same."""
    specs = _mutated(mutant)
    caught = []
    for t, m in _mutant_cases():
        want = route.contraction(t, m)
        _same_bits(route.kernels(t, m, partial(rows_harness.build, threads=4)), want)
        build = partial(rows_harness.build, threads=4, specs=specs)
        try:
            _same_bits(route.kernels(t, m, lambda spec, b=build, s=specs: b(
                s[0] if spec.name == src.ROW_SUM.name else s[1])), want)
        except AssertionError:
            caught.append(True)
    assert caught, f"the mutant {mutant!r} passed every case"


@host_kernels
@pytest.mark.parametrize("name", ["softmax", "attention", "cross_entropy", "layer_norm"])
def test_references_sum_through_the_row_kernels_in_a_strict_namespace(
        route: _Route, strict: Any, name: str) -> None:
    """The cost table's references (small sizes, forward and backward) in CuPy's manners
    on the CPU, every last-axis sum through the row kernels: they keep to the namespace
    and agree with NumPy's evaluation within the oracle's own error (as the namespaces'
    test has it)."""
    from numoracle.oracle.traced.interpret import evaluate

    graph, inputs, ctx = table_case(name, True, f"row_sums_{name}")
    host = evaluate(graph, inputs, ctx)
    route.mp.setattr(fused_cuda, "build", rows_harness.build)
    route.mp.setattr(tracked, "device_row_sums", lambda xp: True)
    other = evaluate(graph, {k: strict.asarray(v) if v.dtype.kind == "f" else v
                             for k, v in inputs.items()},
                     RuleContext(ctx.model, ctx.claims, xp=strict))
    assert True in route.calls, "no sum took the row kernels"
    for out in host:
        _same_tracked(host[out], other[out], f"{name} {out}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["grid", "normal", "wide", "exact"])
def test_device_row_sums_give_the_hosts_bits(cupy: Any, route: _Route, case: str) -> None:
    """CuPy's build of the kernels, a block of BLOCK threads per row, gives the host's
    build with as many threads, bit for bit; ``sum_`` on CuPy (the kernels on) lies within
    the oracle's own error of the NumPy path."""
    rng = np.random.default_rng(len(case))
    shape = {"grid": (6, 300), "normal": (64, 1000), "wide": (4, 9000), "exact": (5, 77)}[case]
    t = _normal_case(rng, shape) if case in ("normal", "wide") else _grid_case(
        rng, shape, "exact" if case == "exact" else "all")
    m = get_model("fp32")
    host = route.kernels(t, m, partial(rows_harness.build, threads=src.BLOCK))
    want = route.contraction(t, m)
    v, d, p, r = (cupy.asarray(np.ascontiguousarray(np.broadcast_to(a, shape)))
                  for a in (t.value, t.det, t.prob, t.ref_err))
    on = bounded(v, d, p, ref_err=r)
    route.mp.setattr(fused_cuda, "_BUILT", {})
    route.mp.setattr(fused_cuda, "build", fused_cuda.cupy_kernel)
    route.mp.setattr(tracked, "device_row_sums", fused.device_row_sums)
    route.mp.setenv(fused.ROW_SUMS_VARIABLE, "1")
    got = sum_(on, -1, m)
    assert route.calls[-1] is True
    _same_bits(got.to_host(), host)
    _within_reassociation(got.to_host(), want)


def test_row_sums_are_on_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy's arrays take the row sums' kernels unless ``NUMORACLE_DEVICE_ROW_SUMS=0``;
    NumPy's never."""
    cupy_like = type("cupy", (), {"__name__": "cupy"})()
    monkeypatch.delenv(fused.ROW_SUMS_VARIABLE, raising=False)
    assert fused.device_row_sums(cupy_like) and not fused.device_row_sums(np)
    monkeypatch.setenv(fused.ROW_SUMS_VARIABLE, "0")
    assert not fused.device_row_sums(cupy_like)
