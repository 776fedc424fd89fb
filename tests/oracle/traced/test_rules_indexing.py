"""The indexing rules (embedding, index_put, scatter_add, bitwise_not) against
torch float32 and mpmath (see traced_rulecheck): lookups are exact, accumulations
are bounded by the length of each position's sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase, check

from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import NoRule, RuleContext, lookup
from numoracle.oracle.tracked import exact

G = torch.Generator().manual_seed(11)
weight = torch.randn(7, 3, generator=G)
tokens = torch.tensor([[0, 6, 6], [3, 0, 6]])
# many repeats: every position of ``base`` receives up to 40 terms of mixed signs and sizes
base = torch.randn(4, 5, generator=G)
src = torch.randn(4, 40, generator=G) * torch.logspace(-3, 3, 40)
where = torch.randint(0, 5, (4, 40), generator=G)
rows = torch.randint(0, 4, (60,), generator=G)
values = torch.randn(60, 5, generator=G) * 100


def _scatter_add_mp(b, dim, index, s):
    out = b.copy()
    for (i, k), t in np.ndenumerate(index):
        out[i, t] = out[i, t] + s[i, k]
    return out


def _index_put_mp(b, indices, v, accumulate):
    out = b.copy()
    for n, r in enumerate(indices[0]):
        out[r] = out[r] + v[n] if accumulate else v[n]
    return out


CASES = [
    RuleCase("aten.embedding.default", (weight, tokens), mp=lambda w, t: w[t], sharp=False,
             id="lookup"),
    RuleCase("aten.scatter_add.default", (base, 1, where, src), mp=_scatter_add_mp,
             id="repeats"),
    RuleCase("aten.scatter_add.default", (torch.zeros(4, 5), 1, where[:, :3], src),
             mp=lambda b, d, i, s: _scatter_add_mp(b, d, i, s[:, :3]), id="zeros-partial-src"),
    RuleCase("aten.index_put.default", (base, [rows], values, True), mp=_index_put_mp,
             id="accumulate"),
    RuleCase("aten.index_put.default", (base, [torch.tensor([2, 0])], values[:2], False),
             mp=_index_put_mp, sharp=False, id="write-once"),
    RuleCase("aten.bitwise_not.default", (torch.tensor([[True, False], [False, False]]),),
             id="bool"),
    RuleCase("aten.bitwise_not.default", (torch.tensor([0, 5, -3]),), id="int64"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule(case: RuleCase) -> None:
    check(case)


def test_sums_of_exact_integers_are_exact_and_bf16_sums_are_bounded() -> None:
    """In the exact regime (small integers) an accumulation has bound 0; under
    bf16 per-op storage each addition rounds, and torch's bf16 result is inside."""
    ints = torch.randint(-8, 8, (4, 40), generator=G).float()
    ctx = RuleContext(get_model("fp32"))
    out = lookup("aten.scatter_add.default")(ctx, exact(np.zeros((4, 5))), 1, where.numpy(),
                                             exact(ints.double().numpy()))
    want = torch.zeros(4, 5).scatter_add(1, where, ints).double().numpy()
    assert np.array_equal(out.value, want) and not out.det.any()
    ctx = RuleContext(get_model("bf16"))
    b16 = src.bfloat16()
    out = lookup("aten.scatter_add.default")(ctx, exact(np.zeros((4, 5))), 1, where.numpy(),
                                             exact(b16.double().numpy()))
    got = torch.zeros(4, 5, dtype=torch.bfloat16).scatter_add(1, where, b16).double().numpy()
    err = np.abs(got - out.value)
    assert np.all(err <= out.det + out.ref_err) and err.max() > 0


def test_a_repeated_write_is_refused_by_name() -> None:
    ctx = RuleContext(get_model("fp32"))
    with pytest.raises(NoRule, match="index_put without accumulate at a repeated index"):
        lookup("aten.index_put.default")(ctx, exact(base.double().numpy()),
                                         [np.array([1, 1])], exact(values[:2].double().numpy()))


def test_bitwise_not_keeps_an_unsure_element_unsure() -> None:
    from numoracle.oracle.traced.library._common import decided

    ctx = RuleContext(get_model("fp32"))
    out = lookup("aten.bitwise_not.default")(ctx, decided([True, False], [False, True]))
    assert out.tolist() == [False, True] and out.unsure.tolist() == [False, True]
