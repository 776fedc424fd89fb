"""KernelBench's own rule beside the oracle's verdict: ``allclose`` in float64, a
piece at a time, the same answer as NumPy's on whole float64 copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numoracle.kernelbench import reference
from numoracle.kernelbench.reference import KERNELBENCH_TOLERANCES, kernelbench_rule


def _numpy_rule(got: np.ndarray, ref: np.ndarray) -> dict[str, bool]:
    return {f"{tol:g}": bool(got.shape == ref.shape and np.allclose(
        ref.astype(np.float64), got.astype(np.float64), atol=tol, rtol=tol))
        for tol in KERNELBENCH_TOLERANCES}


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    ref = rng.standard_normal((37, 29)).astype(np.float32)
    near = ref + np.float32(1e-3) * (1 + np.abs(ref))  # within 1e-2, outside 1e-4
    far = ref.copy()
    far[36, 28] += 1.0  # the last element, the last piece
    edge = ref.copy()
    edge[3, 3] = ref[3, 3] + np.float32(2e-2) * (1 + abs(ref[3, 3]))  # just outside 1e-2
    inf = ref.copy()
    inf[0, 0] = np.inf
    nan = ref.copy()
    nan[10, 1] = np.nan
    return [("equal", ref, ref.copy()), ("near", near, ref), ("far", far, ref),
            ("edge", edge, ref), ("inf in both", inf, inf.copy()), ("inf in one", inf, ref),
            ("nan in both", nan, nan.copy()), ("shape", ref[:, :28].copy(), ref),
            ("integers", np.arange(50), np.arange(50))]


@pytest.mark.parametrize("piece", [7, 1 << 24])
def test_the_rule_in_pieces_agrees_with_numpy_on_whole_float64_copies(
        monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    monkeypatch.setattr(reference, "RULE_PIECE", piece)
    answers = set()
    for name, got, ref in _cases():
        want = _numpy_rule(got, ref)
        assert kernelbench_rule(got, ref) == want, name
        assert kernelbench_rule(got, ref, torch.device("cpu")) == want, name  # torch's
        answers.add(tuple(want.values()))
    assert answers == {(True, True), (True, False), (False, False)}  # each outcome met
