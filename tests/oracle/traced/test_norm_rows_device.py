"""Layer norm's device kernels (``numoracle/oracle/_norm_cuda.py``, run by
``fused_norm_cuda``) against numba's whole-rule loops.

On the host the kernels' C text is compiled by g++ (``norm_harness``: each thread
index a loop, no contraction) and the rules run through ``fused_norm_cuda`` on NumPy
arrays: the same bits as numba's loops (which give the primitives' bits:
``test_norm_rows``) forward and backward on drawn shapes, values, radii, weights,
claims; each kernel alone on NaN, infinities, signed zeros, subnormals and infinite
radii; a changed kernel text is caught. On a GPU (``gpu``-marked) the same kernels
compiled by CuPy: the host build's bits, and each rule the bits of CuPy's primitives
(the kernels switched off: the same sums) and within the oracle's own error of the
NumPy path (whose sums add in another order).
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import norm_harness
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_norm_rows import CASES, _affine, _case, assert_same_bits
from test_softmax_rows import _tracked
from test_softmax_rows_device import _within

from numoracle.oracle import _norm_cuda as src
from numoracle.oracle import fused, fused_cpu, fused_norm_cuda, tracked
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.library import _norm_rows as rows
from numoracle.oracle.traced.library import normalization as nz
from numoracle.oracle.traced.rules import RuleContext
from numoracle.oracle.tracked import Tracked, bounded, exact

host_kernels = pytest.mark.skipif(
    shutil.which("g++") is None or not fused_cpu.norm_available(),
    reason="the host's build of the device kernels needs g++, the loops they are compared "
           "with numba")

KERNELS = ("row_top", "deviation_squares", "normalized_rows", "norm_backward_products",
           "input_grad_rows")


class _Runs(list):
    """The calls of the layer norm functions so far, by module (``take`` empties it)."""

    def take(self) -> list[str]:
        out = list(self)
        self.clear()
        return out


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> _Runs:
    """The loops from one element (their sums not folded into them, as the device
    kernels' are not), and the calls of their functions counted."""
    monkeypatch.setattr(fused_cpu, "LOOP_MIN", 1)
    monkeypatch.setattr(rows, "FOLD_SUMS", False)
    calls = _Runs()
    for mod in (fused_cpu, fused_norm_cuda):
        where = mod.__name__.rsplit(".", 1)[-1]
        for name in KERNELS:
            monkeypatch.setattr(mod, name, functools.partial(_counted, calls, where,
                                                             getattr(mod, name)))
    return calls


def _counted(calls: _Runs, where: str, real: Callable[..., Any], *args: Any) -> Any:
    calls.append(where)
    return real(*args)


@contextlib.contextmanager
def _device_kernels(build: Callable[..., Any] = norm_harness.build) -> Iterator[None]:
    """The rules through ``fused_norm_cuda`` on NumPy arrays, its kernels built on the
    host (by ``build``)."""
    loops = rows._loops
    rows._loops = lambda xp: fused_norm_cuda
    try:
        with _built(build):
            yield
    finally:
        rows._loops = loops


def _forward_backward(ctx: RuleContext, x: Tracked, w: Any, b: Any, shape: tuple[int, ...],
                      eps: float, g: Tracked, mask: tuple[bool, bool, bool]
                      ) -> list[Tracked | None]:
    out = nz.layer_norm_rule(ctx, x, shape, w, b, eps)
    back = nz.layer_norm_backward_rule(ctx, g, x, shape, out[1], out[2], w, b, mask)
    return [*out, *back]


def _same(got: list[Tracked | None], want: list[Tracked | None]) -> None:
    for g, v in zip(got, want, strict=True):
        assert (g is None) == (v is None)
        if v is not None:
            assert_same_bits(g, v)


@host_kernels
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the same patch each time)
@given(**CASES, grad=st.sampled_from(["exact", "all", "some"]),
       mask=st.sampled_from([(True, True, True), (True, False, False), (False, True, True)]))
def test_device_kernels_give_the_loops_bits(runs: _Runs, lead: list[int], lane: list[int],
                                            kind: str, radii: str, special: bool, affine: str,
                                            eps: float, model: str, per_op: bool, seed: int,
                                            grad: str, mask: tuple[bool, bool, bool]) -> None:
    """Forward and backward through the host build of the kernels: numba's loops' bits,
    each loop replaced by its kernel."""
    ctx, x, w, b, shape = _case(lead, lane, kind, radii, special, affine, model, per_op, seed)
    rng = np.random.default_rng(seed + 1)
    g = _tracked(rng.standard_normal(x.shape), rng, grad)
    with np.errstate(all="ignore"):
        runs.take()
        want = _forward_backward(ctx, x, w, b, shape, eps, g, mask)
        by_numba = runs.take()
        with _device_kernels():
            got = _forward_backward(ctx, x, w, b, shape, eps, g, mask)
    assert runs.take() == ["fused_norm_cuda"] * len(by_numba) and by_numba
    _same(got, want)


def _specials(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values with NaN, infinities, zeros of both signs, subnormals, huge ones and
    integers (exact products and differences)."""
    x = rng.standard_normal(shape)
    pick = rng.random(shape)
    for lo, val in ((0.04, np.nan), (0.08, np.inf), (0.12, -np.inf), (0.16, 0.0), (0.2, -0.0),
                    (0.24, 1e-310), (0.28, 1e300)):
        x = np.where((pick >= lo - 0.04) & (pick < lo), val, x)
    return np.where((pick >= 0.28) & (pick < 0.5), np.round(x * 4.0), x)


def _radius(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    r = np.abs(rng.standard_normal(shape)) * 1e-6
    return np.where(rng.random(shape) < 0.4, 0.0, np.where(rng.random(shape) < 0.05, np.inf, r))


def _four(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    return (_specials(rng, shape), *(_radius(rng, shape) for _ in range(3)))


def _stats(rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` tracked numbers as a ``(k, 4)`` array, some of them exact integers."""
    v = np.where(rng.random(k) < 0.3, np.round(rng.standard_normal(k) * 4.0),
                 rng.standard_normal(k))
    r = np.abs(rng.standard_normal((k, 3))) * [1e-9, 1e-9, 1e-12]
    return np.concatenate([v[:, None], np.where(rng.random((k, 1)) < 0.4, 0.0, r)], axis=1)


_PARAMS = ((2.0**-24, 2.0**-126, 2.0**-53, 3.4e38), (24, -126))


def _outputs(fns: Any, seed: int) -> dict[str, tuple[np.ndarray, ...]]:
    """What the layer norm functions of ``fns`` (``fused_cpu`` or ``fused_norm_cuda``)
    give on special values, per row and per column statistics, each flag both ways."""
    rng = np.random.default_rng(seed)
    shape = (5, 33)
    x, g = _four(rng, shape), _four(rng, shape)
    mean, rstd, a, b = (_stats(rng, 5) for _ in range(4))
    w, bias = _stats(rng, 33).T.copy(), _stats(rng, 33).T.copy()
    finite = [rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
              for _ in range(3)]
    out: dict[str, tuple[np.ndarray, ...]] = {
        "top": (fns.row_top(x[0], x[1], x[3]), fns.row_top(finite[0], *np.abs(finite[1:])))}
    with np.errstate(all="ignore"):
        for test in (False, True):
            out[f"squares{test}"] = fns.deviation_squares(x, mean, test, *_PARAMS)
            for has_w in (False, True):
                for has_b in (False, True):
                    out[f"normalized{test}{has_w}{has_b}"] = fns.normalized_rows(
                        x, mean, rstd, w if has_w else None, bias if has_b else None, test,
                        *_PARAMS)
            out[f"input_grad{test}"] = fns.input_grad_rows(x, g, mean, rstd, a, b, test,
                                                           *_PARAMS)
            for has_w in (False, True):
                for want in ((True, True), (True, False), (False, True)):
                    got = fns.norm_backward_products(x, g, mean, rstd, w if has_w else None,
                                                     want, (test, not test), *_PARAMS)
                    for k, arrays in enumerate(got):
                        if arrays is not None:
                            out[f"backward{test}{has_w}{want}{k}"] = arrays
    return out


def _same_bits(got: dict[str, tuple[np.ndarray, ...]],
               want: dict[str, tuple[np.ndarray, ...]]) -> None:
    """The same outputs bit for bit (a NaN's sign and payload are the processor's)."""
    assert got.keys() == want.keys()
    for k, arrays in want.items():
        assert len(got[k]) == len(arrays), k
        for gv, wv in zip(got[k], arrays, strict=True):
            gv, wv = np.asarray(gv), np.asarray(wv)
            nan = np.isnan(gv) & np.isnan(wv)
            assert np.array_equal(np.where(nan, 0, gv.view(np.int64)),
                                  np.where(nan, 0, wv.view(np.int64))), k


@contextlib.contextmanager
def _built(build: Callable[..., Any]) -> Iterator[None]:
    """``fused_norm_cuda``'s kernels made by ``build``, none kept from before or after (a
    builder's id, its cache key, may be a collected one's)."""
    real, kept = fused_norm_cuda.build, dict(fused_norm_cuda._BUILT)
    fused_norm_cuda.build = build
    fused_norm_cuda._BUILT.clear()
    try:
        yield
    finally:
        fused_norm_cuda.build = real
        fused_norm_cuda._BUILT.clear()
        fused_norm_cuda._BUILT.update(kept)


def _host_outputs(seed: int, build: Callable[..., Any] = norm_harness.build
                  ) -> dict[str, tuple[np.ndarray, ...]]:
    with _built(build):
        return _outputs(fused_norm_cuda, seed)


@host_kernels
@pytest.mark.parametrize("seed", range(3))
def test_kernels_alone_on_special_values(seed: int) -> None:
    """Each kernel where no rule would send it (NaN, infinities, infinite radii beside
    exact integers): numba's loop's bits."""
    _same_bits(_host_outputs(seed), _outputs(fused_cpu, seed))


@host_kernels
@pytest.mark.parametrize("threads", [2, 8, 256])
def test_row_top_with_threads(threads: int) -> None:
    """The rows' largest magnitudes with several threads meeting at ``__syncthreads``
    (the device's shared-memory reduction): the one-thread results."""
    def build(spec: Any) -> Any:
        return norm_harness.build(spec, threads)
    for seed in range(2):
        for many, one in zip(_host_outputs(seed, build)["top"], _host_outputs(seed)["top"],
                             strict=True):
            assert np.array_equal(many, one, equal_nan=True)


#: changes of the kernels' text, each of which some output must show
MUTATIONS = {
    "product error's sign": ("(x_hi * y_hi - p)", "(x_hi * y_hi + p)"),
    "exact product's representability": ("&& numoracle_representable(o.v, t, emin, fmax)) {\n"
                                         "    o.d = 0.0;", ") {\n    o.d = 0.0;"),
    "fold widening's mean": ("(fabs(xv) + fabs(mean[0]))", "(fabs(xv) + fabs(mean[1]))"),
    "bias widening": ("double wide = u * fabs(bv);", "double wide = u * bv;"),
    "input gradient's second mean": ("b[0], b[1], b[2], b[3]", "a[0], a[1], a[2], a[3]"),
    "weighted gradient's test": ("ARGS, test_gx", "ARGS, test"),
    "row top's reach": ("+ xd[i * d0 + j * d1]) + xr", "+ xd[i * d0 + j * d1]) - xr"),
}


@host_kernels
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_changed_kernel_is_caught(name: str) -> None:
    """Each change of the C text (the kernels compiled from the changed text) gives some
    output other bits than numba's loops."""
    old, new = MUTATIONS[name]
    if name == "weighted gradient's test":
        old, new = ("w[3 * cols + j], " + old.replace("ARGS", src._ARGS),
                    "w[3 * cols + j], " + new.replace("ARGS", src._ARGS))
    else:
        old, new = old.replace("ARGS", src._ARGS), new.replace("ARGS", src._ARGS)
    assert norm_harness.source().count(old) >= 1, name

    def build(spec: Any) -> Any:
        return norm_harness.build(spec, mutate=lambda text: text.replace(old, new))
    for seed in range(3):
        want = _outputs(fused_cpu, seed)
        try:
            _same_bits(_host_outputs(seed, build), want)
        except AssertionError:
            return
    pytest.fail(f"the change {name!r} gave numba's bits")


@host_kernels
@pytest.mark.parametrize("per_op", [False, True])
def test_device_forms_keep_to_device_arrays(runs: _Runs, strict: Any, per_op: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules through ``fused_norm_cuda`` in the strict namespace (CuPy's manners: no
    host array beside its arrays, no implicit conversion), its kernels built on the
    host: numba's loops' bits, so no host array slips into the device forms."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 50)).astype(np.float32).astype(np.float64)
    model = get_model("bf16", rounding="per-op") if per_op else get_model("bf16")
    ctx, sctx = RuleContext(model), RuleContext(model, xp=strict)

    def on(t: Tracked) -> Tracked:
        return bounded(*(strict.asarray(a) for a in (t.value, t.det, t.prob)),
                       ref_err=strict.asarray(t.ref_err))
    w, b = _affine(rng, (50,), "tracked"), _affine(rng, (50,), "exact")
    g = _tracked(rng.standard_normal(x.shape), rng, "some")
    monkeypatch.setattr(rows, "whole_rules", lambda xp, size: size > 0)
    monkeypatch.setenv(fused_norm_cuda.DEVICE_NORM_VARIABLE, "1")
    for t in (exact(x), _tracked(x, rng, "all")):
        with np.errstate(all="ignore"):
            runs.take()
            want = _forward_backward(ctx, t, w, b, (50,), 1e-5, g, (True, True, True))
            assert set(runs.take()) == {"fused_cpu"}
            with _device_kernels():
                got = _forward_backward(sctx, on(t), on(w), exact(strict.asarray(b.value)),
                                        (50,), 1e-5, on(g), (True, True, True))
        assert set(runs.take()) == {"fused_norm_cuda"}
        _same([None if r is None else r.to_host() for r in got], want)


@host_kernels
@pytest.mark.parametrize("size", ["small", "realistic"])
def test_the_traced_reference_through_the_kernels_in_a_strict_namespace(
        runs: _Runs, strict: Any, size: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost table's layer norm (forward and backward, weight and bias) evaluated in
    CuPy's manners on the CPU, its rules through the kernels built on the host: it keeps
    to the namespace and agrees with NumPy's evaluation within the oracle's own error (as
    the namespaces' test has it)."""
    import torch  # noqa: PLC0415 - the capture's
    from test_rules_backends import _same_tracked  # noqa: PLC0415 - imports torch

    from benchmarks.traced.table import REFERENCES, _inputs  # noqa: PLC0415
    from numoracle.oracle.traced.capture import capture  # noqa: PLC0415
    from numoracle.oracle.traced.interpret import evaluate  # noqa: PLC0415
    from numoracle.oracle.traced.op import TracedOp  # noqa: PLC0415

    fn, grads = REFERENCES["layer_norm"]
    rng = np.random.default_rng(0)
    inputs = _inputs("layer_norm", size, rng)
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in inputs.items()},
                  grads=grads, name="norm_rows_layer_norm")
    for k, shape in op.input_shapes({}).items():
        inputs.setdefault(k, rng.standard_normal(shape).astype(np.float32).astype(np.float64))
    graph = capture(op.ref, {k: inputs[k] for k in op.ref.names},
                    {k: v for k, v in inputs.items() if k.startswith("grad_")})
    ctx = op.context(get_model("fp32"))
    with np.errstate(all="ignore"):
        host = evaluate(graph, inputs, ctx)
        runs.take()
        monkeypatch.setattr(rows, "whole_rules", lambda xp, size: size > 0)
        monkeypatch.setenv(fused_norm_cuda.DEVICE_NORM_VARIABLE, "1")
        with _built(norm_harness.build):
            other = evaluate(graph, {k: strict.asarray(v) if v.dtype.kind == "f" else v
                                     for k, v in inputs.items()},
                             RuleContext(ctx.model, ctx.claims, xp=strict))
    assert runs.take() == ["fused_norm_cuda"] * 5
    for out in host:
        _same_tracked(host[out], other[out], f"layer_norm {out}")


@host_kernels
def test_the_kernels_are_off_where_switched_off(runs: _Runs, strict: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``NUMORACLE_DEVICE_NORM=0`` a device's layer norm takes the primitives."""
    monkeypatch.setenv(fused_norm_cuda.DEVICE_NORM_VARIABLE, "0")
    monkeypatch.setattr(rows, "whole_rules", lambda xp, size: size > 0)
    x = exact(strict.asarray(np.linspace(-1.0, 2.0, 300).reshape(3, 100)))
    with _built(norm_harness.build):
        nz.layer_norm_rule(RuleContext(get_model("fp32"), xp=strict), x, (100,), None, None,
                           1e-5)
    assert runs.take() == []


# on a GPU: CuPy's build of the same kernels


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("g++") is None, reason="the host's build is compared with")
@pytest.mark.parametrize("seed", range(3))
def test_device_kernels_alone_on_special_values(cupy: Any, seed: int) -> None:
    """The host build's bits on the device (compiled with ``--fmad=false``), so numba's
    loops' (``test_kernels_alone_on_special_values``)."""
    with _built(fused_norm_cuda._cupy_kernel):
        dev = _outputs(_OnDevice(cupy), seed)
    _same_bits(dev, _host_outputs(seed))


class _OnDevice:
    """``fused_norm_cuda``'s functions given the host arrays on the device, their results
    brought back."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp

    def __getattr__(self, name: str) -> Any:
        cp = self.cp

        def dev(a: Any) -> Any:
            if isinstance(a, tuple):
                return tuple(dev(b) for b in a)
            return cp.asarray(a) if isinstance(a, np.ndarray) else a

        def back(a: Any) -> Any:
            if isinstance(a, tuple):
                return tuple(back(b) for b in a)
            return cp.asnumpy(a) if a is not None else None

        def call(*args: Any) -> Any:
            out = getattr(fused_norm_cuda, name)(*(dev(a) for a in args))
            return back(out)
        return call


def _device_case(cp: Any, shape: tuple[int, ...], radii: str, seed: int
                 ) -> tuple[Tracked, Tracked, Any, Any, Any, Any, Tracked, Tracked]:
    """A case on the host and the same on the device: input, weight, bias, gradient."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3.0 + 0.5).astype(np.float32).astype(np.float64)
    t = _tracked(x, rng, radii)
    lane = shape[-1:]
    w, b = _affine(rng, lane, "tracked"), _affine(rng, lane, "exact")
    g = _tracked(rng.standard_normal(shape), rng, "all")

    def on(s: Tracked) -> Tracked:
        if s.det is s.prob and not np.any(s.det):
            return exact(cp.asarray(s.value))
        return bounded(*(cp.asarray(a) for a in (s.value, s.det, s.prob)),
                       ref_err=cp.asarray(s.ref_err))
    return t, on(t), w, on(w), b, on(b), g, on(g)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["256x4096", "3x20000", "4x8x1024 exact", "2000x1",
                                  "64x512 per-op"])
def test_device_rules_give_cupys_primitives_bits(cupy: Any, runs: _Runs,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 case: str) -> None:
    """Layer norm forward and backward by the kernels on CuPy: the bits of CuPy's
    primitives (the kernels left out, the sums the same), and within the oracle's own
    error of the NumPy path and of CuPy's primitives with the switch off; the kernels
    run. The sums' magnitudes in float64 everywhere (the host's float32 and the device's
    TF32 magnitude sums loosen a radius by different shares of itself: not the kernels'
    concern)."""
    monkeypatch.setattr(tracked, "SINGLE_SUMS", False)
    size, _, how = case.partition(" ")
    shape = tuple(int(s) for s in size.split("x"))
    t, dt, w, dw, b, db, g, dg = _device_case(cupy, shape, "exact" if how == "exact" else "all",
                                              len(case))
    model = get_model("bf16", rounding="per-op") if how == "per-op" else get_model("bf16")
    ctx, dctx = RuleContext(model), RuleContext(model, xp=cupy)
    lane = shape[-1:]
    mask = (True, True, True)
    loops_run = rows.loops_run
    with np.errstate(all="ignore"):
        want = _forward_backward(ctx, t, w, b, lane, 1e-5, g, mask)
        monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "0")
        runs.take()
        off = _forward_backward(dctx, dt, dw, db, lane, 1e-5, dg, mask)
        assert "fused_norm_cuda" not in runs.take()
        monkeypatch.setenv(fused.DEVICE_ROWS_VARIABLE, "1")
        monkeypatch.setenv(fused_norm_cuda.DEVICE_NORM_VARIABLE, "1")
        monkeypatch.setattr(rows, "loops_run", lambda xp, size: False)
        plain = _forward_backward(dctx, dt, dw, db, lane, 1e-5, dg, mask)
        assert "fused_norm_cuda" not in runs.take()
        monkeypatch.setattr(rows, "loops_run", loops_run)
        got = _forward_backward(dctx, dt, dw, db, lane, 1e-5, dg, mask)
    assert runs.take() == ["fused_norm_cuda"] * 5
    _same([r.to_host() for r in got], [r.to_host() for r in plain])
    for k, (h, o, d) in enumerate(zip(want, off, got, strict=True)):
        _within(h, d, f"the NumPy path, output {k}")
        _within(o.to_host(), d, f"CuPy's primitives, switch off, output {k}")
