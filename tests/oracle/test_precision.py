"""Order heights, gamma functions and precision presets."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.errors import InvalidArgument
from numoracle.oracle.precision import PRESETS, Order, gamma, gamma_tilde, get_model, lam


@pytest.mark.parametrize(("spec", "n", "h"), [
    ("any", 1, 0), ("any", 1000, 999), ("sequential", 7, 6), ("pairwise", 1, 0),
    ("pairwise", 2, 1), ("pairwise", 1000, 10), ("blocked(32)", 32, 31),
    ("blocked(32)", 1024, 62), ("blocked(4)", 5, 4),
])
def test_order_height(spec: str, n: int, h: int) -> None:
    assert int(Order.parse(spec).height(n)) == h


def test_height_is_a_real_tree_height() -> None:
    # simulate pairwise summation of n ones counting additions on the deepest path
    for n in range(1, 70):
        depth = [0] * n
        while len(depth) > 1:
            depth = [max(depth[i], depth[i + 1]) + 1 if i + 1 < len(depth) else depth[i]
                     for i in range(0, len(depth), 2)]
        assert int(Order.parse("pairwise").height(n)) == depth[0]


@pytest.mark.parametrize("spec", ["random", "blocked(0)", "blocked()", "", "pairwise2"])
def test_order_rejects(spec: str) -> None:
    with pytest.raises(InvalidArgument):
        Order.parse(spec)


def test_gamma_tilde_is_below_gamma_and_grows_like_sqrt() -> None:
    h = np.array([1, 10, 100, 10_000, 1_000_000])
    u = 2.0**-24
    assert np.all(gamma_tilde(h, u, 1e-6) <= gamma(h, u))
    g = gamma_tilde(h[2:], u, 1e-6)
    assert np.all(np.diff(np.log(g)) < np.log(100) * 0.6)  # ~sqrt(h) * slowly growing lambda
    assert 5 < float(lam(np.array(1000), 1e-6)) < 8


def test_gamma_saturates() -> None:
    assert np.isinf(gamma(np.array(2**24), 2.0**-24))


def test_presets_describe() -> None:
    assert "tf32 compute" in PRESETS["tf32"].describe()
    assert PRESETS["bf16"].accumulate.name == "fp32"
    assert get_model("fp32", order="pairwise").order == Order("pairwise")


@pytest.mark.parametrize(("kw", "match"), [
    ({"spec": "fp8"}, "unknown"),
    ({"spec": "fp32", "probabilistic": True, "accumulate_rounding": "rz"}, "round-to-nearest"),
    ({"spec": "fp32", "alpha": 2.0}, "alpha"),
    ({"spec": "fp32", "order": "zigzag"}, "order"),
])
def test_get_model_rejects(kw: dict, match: str) -> None:
    spec = kw.pop("spec")
    with pytest.raises(InvalidArgument, match=match):
        get_model(spec, **kw)


def test_a_models_kept_hash_is_the_fields_hash_and_is_not_pickled() -> None:
    """A model's and a format's hash is computed once and is the hash of the fields that
    equality compares (equal models hash alike, a changed field hashes anew); a pickled
    model carries no kept hash (another process hashes strings with another seed) and
    comes back equal, hashing as a fresh one."""
    import dataclasses
    import os
    import pickle
    import subprocess
    import sys

    m = get_model("tf32")
    fields = tuple(getattr(m, f.name) for f in dataclasses.fields(m) if f.compare)
    assert hash(m) == hash(fields) == hash(get_model("tf32"))
    assert m.__dict__["_hash"] == hash(m)
    other = dataclasses.replace(m, alpha=m.alpha / 2)
    assert "_hash" not in other.__dict__ and other != m
    assert hash(other) == hash(tuple(getattr(other, f.name) for f in dataclasses.fields(other)
                                     if f.compare))
    state = pickle.dumps(m)
    assert b"_hash" not in state and b"_hash" not in pickle.dumps(m.compute)
    back = pickle.loads(state)
    assert back == m and hash(back) == hash(m) and {m: 1}[back] == 1
    # in another process (another string hash seed): equal to its own model, keys its dict
    code = ("import pickle, sys; from numoracle.oracle.precision import get_model; "
            "m = pickle.loads(sys.stdin.buffer.read()); "
            "print(m == get_model('tf32') and {get_model('tf32'): 1}.get(m) == 1)")
    out = subprocess.run([sys.executable, "-c", code], input=state, capture_output=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"},
                         check=True)
    assert out.stdout.strip() == b"True", out.stderr
