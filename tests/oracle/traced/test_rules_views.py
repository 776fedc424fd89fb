"""The data-movement rules (views, copies, joins, casts, factories) against torch:
exact selections, so the torch float64 result is the exact one (see traced_rulecheck)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, aten_op, check

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import NoRule, RuleContext, lookup
from numoracle.oracle.tracked import exact

G = torch.Generator().manual_seed(7)
x = torch.randn(2, 3, 4, generator=G)
sq = torch.randn(1, 3, 1, 4, generator=G)
idx = torch.tensor([2, 0, 1])


CASES = [
    RuleCase("aten.view.default", (x, [6, 4]), mp=lambda v, s: v.reshape(6, 4)),
    RuleCase("aten._unsafe_view.default", (x, [-1]), mp=lambda v, s: v.reshape(-1)),
    RuleCase("aten.reshape.default", (x, [4, -1]), mp=lambda v, s: v.reshape(4, -1)),
    RuleCase("aten.view_copy.default", (x, [3, 8]), mp=lambda v, s: v.reshape(3, 8)),
    RuleCase("aten.alias.default", (x,), mp=lambda v: v),
    RuleCase("aten.clone.default", (x,), mp=lambda v: v),
    RuleCase("aten.lift_fresh_copy.default", (x,), mp=lambda v: v),
    RuleCase("aten.detach.default", (x,), mp=lambda v: v),
    RuleCase("aten.contiguous.default", (x,), mp=lambda v: v),
    RuleCase("aten.permute.default", (x, [2, 0, 1]), mp=lambda v, p: v.transpose(2, 0, 1)),
    RuleCase("aten.permute_copy.default", (x, [1, 0, 2]), mp=lambda v, p: v.transpose(1, 0, 2)),
    RuleCase("aten.transpose.int", (x, 0, 2), mp=lambda v, a, b: np.swapaxes(v, 0, 2)),
    RuleCase("aten.t.default", (x[0],), mp=lambda v: v.T),
    RuleCase("aten.expand.default", (sq, [2, 3, 5, 4]),
             mp=lambda v, s: np.broadcast_to(v, (2, 3, 5, 4))),
    RuleCase("aten.expand_copy.default", (sq, [3, -1, 2, -1]),
             mp=lambda v, s: np.broadcast_to(v, (3, 3, 2, 4))),
    RuleCase("aten.squeeze.dims", (sq, [0, 2]), mp=lambda v, d: v.reshape(3, 4)),
    RuleCase("aten.squeeze.dim", (sq, 2), mp=lambda v, d: v.reshape(1, 3, 4)),
    RuleCase("aten.squeeze.default", (sq,), mp=lambda v: v.reshape(3, 4)),
    RuleCase("aten.unsqueeze.default", (x, -1), mp=lambda v, d: v[..., None]),
    RuleCase("aten.slice.Tensor", (x, 2, 1, 4, 2), mp=lambda v, *a: v[:, :, 1:4:2]),
    RuleCase("aten.slice_copy.Tensor", (x, 1, 0, 2), mp=lambda v, *a: v[:, 0:2]),
    RuleCase("aten.select.int", (x, 1, -1), mp=lambda v, d, i: v[:, -1]),
    RuleCase("aten.select_copy.int", (x, 0, 1), mp=lambda v, d, i: v[1]),
    RuleCase("aten.flip.default", (x, [0, 2]), mp=lambda v, d: v[::-1, :, ::-1]),
    RuleCase("aten.roll.default", (x, [1], [2]), mp=lambda v, s, d: np.roll(v, 1, axis=2)),
    RuleCase("aten.triu.default", (x, 1), mp=lambda v, d: v * np.triu(np.ones((3, 4)), 1)),
    RuleCase("aten.tril.default", (x,), mp=lambda v: v * np.tril(np.ones((3, 4)))),
    RuleCase("aten.cat.default", ([x, x[:, :1]], 1),
             mp=lambda vs, d: np.concatenate(vs, axis=1)),
    RuleCase("aten.stack.default", ([x, x], 2), mp=lambda vs, d: np.stack(vs, axis=2)),
    RuleCase("aten.constant_pad_nd.default", (x, [1, 2, 0, 1], 0.0),
             mp=lambda v, p, c: np.pad(v, ((0, 0), (0, 1), (1, 2)), constant_values=0)),
    RuleCase("aten.constant_pad_nd.default", (x, [-1, 1], 0.1),
             mp=lambda v, p, c: np.pad(v[..., 1:], ((0, 0), (0, 0), (0, 1)),
                                       constant_values=np.float64(0.1)), id="crop-inexact-fill"),
    RuleCase("aten.index_select.default", (x, 1, idx), mp=lambda v, d, i: v[:, [2, 0, 1]]),
    RuleCase("aten.gather.default", (x, 2, torch.tensor([[[3, 0], [1, 1], [2, 0]]] * 2)),
             mp=lambda v, d, i: np.take_along_axis(v[:, :, :], i, axis=2)),
    RuleCase("aten.index.Tensor", (x, [None, idx]), mp=lambda v, i: v[:, [2, 0, 1]]),
    RuleCase("aten._to_copy.default", (x,), {"dtype": torch.float16},
             mp=lambda v, dtype: v, sharp=False, id="fp16"),
    RuleCase("aten._to_copy.default", (x,), {"dtype": torch.float64}, mp=lambda v, dtype: v),
    RuleCase("aten._to_copy.default", (x > 0,), {"dtype": torch.float32},
             mp=lambda v, dtype: v.astype(np.float64), id="bool-to-float"),
    RuleCase("aten._to_copy.default", (x * 4,), {"dtype": torch.int64}, id="to-int"),
    RuleCase("aten.copy.default", (x, x[0] * 0 + 1), mp=lambda a, b: np.broadcast_to(b, a.shape)),
    RuleCase("aten.copy_.default", (x.clone(), x[:, :1]),
             mp=lambda a, b: np.broadcast_to(b, a.shape)),
    RuleCase("aten.full.default", ([2, 3], 0.5), mp=lambda s, c: np.full((2, 3), c)),
    RuleCase("aten.full_like.default", (x, -2.0), mp=lambda v, c: v * 0 - 2),
    RuleCase("aten.zeros_like.default", (x,), mp=lambda v: v * 0),
    RuleCase("aten.empty_like.default", (x,), mp=None, id="shape-only"),
    RuleCase("aten.ones_like.default", (x,), mp=lambda v: v * 0 + 1),
    RuleCase("aten.zeros.default", ([3, 2],), mp=lambda s: np.zeros((3, 2))),
    RuleCase("aten.ones.default", ([3],), mp=lambda s: np.ones(3)),
    RuleCase("aten.empty.memory_format", ([3],), mp=None, id="shape-only"),
    RuleCase("aten.new_zeros.default", (x, [2]), mp=lambda v, s: np.zeros(2)),
    RuleCase("aten.new_empty.default", (x, [2]), mp=None, id="shape-only"),
    RuleCase("aten.empty_permuted.default", ([2, 3], [1, 0]), mp=None, id="shape-only"),
    RuleCase("aten.scalar_tensor.default", (1.5,), mp=lambda s: np.array(1.5)),
    RuleCase("aten.arange.start_step", (0, 10, 3)),
    RuleCase("aten.arange.default", (5,)),
    RuleCase("aten.arange.start", (2, 5)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    if case.mp is None and case.name.split(".")[1].startswith(("empty", "new_empty")):
        # uninitialised memory: only the shape is the op's
        ctx = RuleContext(get_model("fp32"))
        args = [a if not isinstance(a, torch.Tensor) else exact(a.double().numpy())
                for a in case.args]
        out = lookup(case.name)(ctx, *args, **case.kwargs)
        with torch.no_grad():
            assert out.shape == tuple(aten_op(case.name)(*case.args, **case.kwargs).shape)
        return
    check(RuleCase(case.name, case.args, case.kwargs, case.mp, case.claims, case.model,
                   sharp=False, id=case.id))


def test_moves_keep_radii() -> None:
    """A permuted inexact value keeps each element's radius with it."""
    ctx = RuleContext(get_model("fp32"))
    e = lookup("aten.exp.default")(ctx, exact(x.double().numpy()))
    p = lookup("aten.permute.default")(ctx, e, [2, 0, 1])
    assert np.array_equal(p.det, np.transpose(e.det, (2, 0, 1)))


def test_cast_of_unsure_integer_is_refused() -> None:
    ctx = RuleContext(get_model("fp32"))
    e = lookup("aten.exp.default")(ctx, exact(np.log(np.array([3.0]))))
    with pytest.raises(NoRule, match="different integer"):
        lookup("aten._to_copy.default")(ctx, e, dtype=torch.int64)
