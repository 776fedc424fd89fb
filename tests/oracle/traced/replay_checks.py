"""What the tests of recorded evaluations compare: a tracked output's field on the host, and
a compiled replay against the evaluation (values within its own error, radii no smaller)."""

from __future__ import annotations

from typing import Any

import numpy as np

from numoracle.oracle.xp import to_numpy


def host(t: Any, f: str) -> np.ndarray:
    """Field ``f`` of tracked ``t`` as a float64 host array of ``t``'s shape."""
    return np.broadcast_to(np.asarray(to_numpy(getattr(t, f)), dtype=np.float64), t.shape)


def assert_bounds_what_it_bounds(truth: dict[str, Any], got: dict[str, Any]) -> None:
    """Each output of ``got`` (a compiled replay) within ``truth``'s (the evaluation's)
    ``ref_err`` of its value, with radii at least ``truth``'s."""
    for k, t in truth.items():
        want, have = t.to_host(), got[k].to_host()
        err = host(want, "ref_err")
        assert np.all(np.abs(host(have, "value") - host(want, "value")) <= err), k
        for f in ("ref_err", "det", "prob"):
            assert np.all(host(have, f) >= host(want, f)), (k, f)
