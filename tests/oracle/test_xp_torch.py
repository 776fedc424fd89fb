"""torch's namespace (:class:`~numoracle.oracle.xp.TorchNumPy`) where it does in fewer
tensor operations what torch's NumPy API does (operators with numbers, in-place operators,
``where`` with a number, ``isfinite``, ``moveaxis`` in place, ``flags``): the same values bit for bit,
the same dtype, shape and strides (a later sum adds in the same order), and fewer
operations in a recorded graph."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch._numpy as tnp
from torch.fx.experimental.proxy_tensor import make_fx

from numoracle.oracle.xp import namespace_named

TX = namespace_named("torch")


def _values(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))
    flat = x.reshape(-1)
    flat[:6] = [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-1074]
    return torch.from_numpy(x)


def _a() -> Any:
    return TX.asarray(_values((6, 5), 1))


def _b() -> Any:
    return TX.asarray(_values((6, 5), 2))


def _permuted() -> Any:
    return TX.asarray(_values((5, 6), 3).T)


#: (name, ours, torch's NumPy API's): each a function of fresh operands
CASES: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
    ("a + int", lambda: _a() + 1, lambda: tnp.add(_a(), 1)),
    ("int + a", lambda: 1 + _a(), lambda: tnp.add(1, _a())),
    ("a - float", lambda: _a() - 0.1, lambda: tnp.subtract(_a(), 0.1)),
    ("int - a", lambda: 3 - _a(), lambda: tnp.subtract(3, _a())),
    ("a * int", lambda: _a() * 3, lambda: tnp.multiply(_a(), 3)),
    ("a / int", lambda: _a() / 3, lambda: tnp.divide(_a(), 3)),
    ("int / a", lambda: 3 / _a(), lambda: tnp.divide(3, _a())),
    ("a == 0", lambda: _a() == 0, lambda: tnp.equal(_a(), 0)),
    ("a != 0", lambda: _a() != 0, lambda: tnp.not_equal(_a(), 0)),
    ("a != b", lambda: _a() != _b(), lambda: tnp.not_equal(_a(), _b())),
    ("a < float", lambda: _a() < 0.5, lambda: tnp.less(_a(), 0.5)),
    ("a >= b", lambda: _a() >= _b(), lambda: tnp.greater_equal(_a(), _b())),
    ("a.T > inf", lambda: _permuted() > math.inf, lambda: tnp.greater(_permuted(), math.inf)),
    ("a += b", lambda: _iop(_a(), "__iadd__", _b()), lambda: tnp.add(_a(), _b())),
    ("a -= int", lambda: _iop(_a(), "__isub__", 2), lambda: tnp.subtract(_a(), 2)),
    ("a *= float", lambda: _iop(_a(), "__imul__", 0.3), lambda: tnp.multiply(_a(), 0.3)),
    ("a /= b", lambda: _iop(_a(), "__itruediv__", _b()), lambda: tnp.divide(_a(), _b())),
    ("a += a.T (shared)", lambda: _self_transposed(TX), lambda: _self_transposed(None)),
    ("where(m, 0, a)", lambda: TX.where(_a() > _b(), 0.0, _a()),
     lambda: tnp.where(_a() > _b(), 0.0, _a())),
    ("where(m, inf, a.T)", lambda: TX.where(_permuted() > 0, math.inf, _permuted()),
     lambda: tnp.where(_permuted() > 0, math.inf, _permuted())),
    ("where(m, a, 0)", lambda: TX.where(_a() > 0, _a(), 0), lambda: tnp.where(_a() > 0, _a(), 0)),
    ("isfinite(a)", lambda: TX.isfinite(_a()), lambda: tnp.isfinite(_a())),
    ("isfinite(a.T)", lambda: np.isfinite(_permuted()), lambda: tnp.isfinite(_permuted())),
    ("moveaxis(a, -1, 1)", lambda: np.moveaxis(_a(), -1, 1),
     lambda: tnp.moveaxis(_a(), -1, 1)),
    ("moveaxis(a, 0, -1)", lambda: np.moveaxis(_a(), 0, -1),
     lambda: tnp.moveaxis(_a(), 0, -1)),
]


def _iop(a: Any, name: str, b: Any) -> Any:
    out = getattr(a, name)(b)
    assert out is a  # (in place: the array itself)
    return a


def _self_transposed(xp: Any) -> Any:
    t = torch.arange(16.0, dtype=torch.float64).reshape(4, 4)
    a = TX.asarray(t)
    if xp is None:
        return tnp.add(a, tnp.asarray(t.T), out=a)
    a += TX.asarray(t.T)
    return a


def _same(got: Any, want: Any) -> None:
    g, w = TX.tensor(got), TX.tensor(want)
    assert (g.dtype, tuple(g.shape), g.stride()) == (w.dtype, tuple(w.shape), w.stride())
    if g.is_floating_point():  # (bits, the sign of zero included; NaN where NaN)
        assert torch.equal(g.isnan(), w.isnan())
        assert torch.equal(g[~g.isnan()].view(torch.int64), w[~w.isnan()].view(torch.int64))
    else:
        assert torch.equal(g, w)


@pytest.mark.parametrize(("name", "ours", "theirs"), CASES, ids=[c[0] for c in CASES])
def test_the_namespace_gives_torchs_numpy_apis_results(
        name: str, ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    _same(ours(), theirs())


def _ops(fn: Callable[[Any], Any]) -> int:
    graph = make_fx(lambda t: TX.tensor(fn(TX.asarray(t))), tracing_mode="real")(
        _values((6, 5), 4))
    return sum(1 for n in graph.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda a: a == 0, lambda a: tnp.equal(a, 0)),
    (lambda a: a != 0, lambda a: tnp.not_equal(a, 0)),
    (lambda a: TX.where(a > 0.5, 0.0, a), lambda a: tnp.where(tnp.greater(a, 0.5), 0.0, a)),
    (lambda a: _iop(a * 2.0, "__iadd__", 1.0), lambda a: tnp.add(a * 2.0, 1.0, out=a * 2.0)),
    (lambda a: np.moveaxis(a, -1, -1) + 1.0, lambda a: tnp.moveaxis(a, -1, -1) + 1.0),
    (lambda a: TX.isfinite(a), lambda a: tnp.isfinite(a)),
], ids=["eq", "ne", "where", "iadd", "moveaxis", "isfinite"])
def test_the_namespace_records_fewer_operations(ours: Callable[[Any], Any],
                                                theirs: Callable[[Any], Any]) -> None:
    assert _ops(ours) < _ops(theirs)


@pytest.mark.parametrize("view", [
    lambda t: t, lambda t: t.T, lambda t: t[:, :1], lambda t: t[::2], lambda t: t[:0],
    lambda t: t[:1].expand(3, 5), lambda t: t.T[:1], lambda t: t[0]],
    ids=["plain", "transposed", "column", "strided", "empty", "expanded", "row of T", "row"])
def test_flags_are_torchs_numpy_apis(view: Callable[[torch.Tensor], torch.Tensor]) -> None:
    a = TX.asarray(view(_values((6, 5), 5)))
    want = {"C_CONTIGUOUS": a.tensor.is_contiguous(),
            "F_CONTIGUOUS": a.tensor.permute(*reversed(range(a.ndim))).is_contiguous(),
            "OWNDATA": a.tensor._base is None, "WRITEABLE": True}
    assert {k: a.flags[k] for k in want} == want
    assert not _ops(lambda x: x if x.flags.f_contiguous else x)  # (no operation)
