"""The probabilistic bound only where running sums cannot stagnate: a sequential
fp32 sum of nonzero-mean data beyond it is judged by the deterministic bound."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.oracle.precision import (
    STAGNATION_LIMIT,
    Order,
    gamma,
    gamma_prob,
    gamma_tilde,
    get_model,
)
from numoracle.oracle.tracked import exact, matmul

U = 2.0**-24


@pytest.mark.parametrize("order, n, chain", [
    ("any", 1000, 999), ("sequential", 5, 4), ("pairwise", 1 << 20, 1),
    ("blocked(32)", 1024, 31), ("blocked(32)", 1 << 20, 32767), ("pairwise", 1, 0)])
def test_the_chain_is_the_longest_running_sum(order, n, chain):
    assert int(Order.parse(order).chain(n)) == chain


def test_the_probabilistic_bound_stops_where_sums_may_stagnate():
    edge = int(STAGNATION_LIMIT / U)
    below = float(gamma_prob(edge, U, 1e-6, edge))
    above = float(gamma_prob(edge + 1, U, 1e-6, edge + 1))
    assert below == float(gamma_tilde(edge, U, 1e-6)) < float(gamma(edge, U))
    assert above == float(gamma(edge + 1, U))
    # pairwise: the probabilistic bound at every length
    h = 23
    assert float(get_model("fp32", order="pairwise").gamma_prob(h, 1 << 23)) == float(
        gamma_tilde(h, U, 1e-6))


def test_a_sequential_dot_of_nonzero_mean_data_stays_within_the_sharp_bound():
    """2^18 U[0,1) products summed left to right in fp32: their rounding errors are
    biased (the sum outgrows its terms); the bound judged under --sharp holds it."""
    rng = np.random.default_rng(7)
    n = 1 << 18
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    got = float(np.add.accumulate((x * y).astype(np.float32), dtype=np.float32)[-1])
    model = get_model("fp32", order="sequential", probabilistic=True)
    t = matmul(exact(x.astype(np.float64)[None, :]), exact(y.astype(np.float64)[:, None]), model)
    err = abs(got - float(t.value[0, 0]))
    assert err < float(t.bound(True)[0, 0])
    old = float(gamma_tilde(np.asarray(n), U, 1e-6)) * float(np.sum(x.astype(np.float64) * y))
    assert err > 0.05 * old  # the error the old bound would have had to cover is not small
