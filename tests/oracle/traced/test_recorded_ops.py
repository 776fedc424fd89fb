"""Hand-written ops' references recorded and replayed (:mod:`numoracle.oracle.recorded`):
on torch's tensors with recordings switched on, a signature's later cases replay its
recording with the evaluation's values and radii bit for bit; a case that decides
otherwise is evaluated afresh; NumPy's arrays and the mode ``off`` are not recorded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from numoracle.oracle import recorded  # noqa: E402
from numoracle.oracle.ops import get_op  # noqa: E402
from numoracle.oracle.precision import get_model  # noqa: E402
from numoracle.oracle.traced.recording import MODE_VARIABLE  # noqa: E402
from numoracle.oracle.xp import to_numpy  # noqa: E402
from replay_checks import assert_bounds_what_it_bounds, host  # noqa: E402

FIELDS = ("value", "ref_err", "det", "prob", "mag")
OP = get_op("linear")
PARAMS = OP.validate({"batch": 6, "in_features": 16, "out_features": 8, "bias": True})
MODEL = get_model("fp32")


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    recorded._RECORDINGS.clear()  # noqa: SLF001 - each test's recordings its own
    yield
    recorded._RECORDINGS.clear()  # noqa: SLF001


def _case(seed: int, *, special: float | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
           for k, s in OP.input_shapes(PARAMS).items()}
    if special is not None:
        out["x"][1, 2] = special
    return out


def _tensors(case: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: torch.from_numpy(v.copy()) for k, v in case.items()}


def _assert_bits(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert set(a) == set(b)
    for k in a:
        for f in FIELDS:
            np.testing.assert_array_equal(host(a[k], f), host(b[k], f), err_msg=f"{k}.{f}")


def test_later_cases_replay_the_recording_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "replay")
    for seed in (1, 2, 3, 4):
        got = recorded.reference(OP, _tensors(_case(seed)), PARAMS, MODEL)
        _assert_bits(got, OP.reference(_tensors(_case(seed)), PARAMS, MODEL))
    (rec,) = recorded.recordings(OP).kept.values()
    assert rec.replays == 3  # (the first case evaluated, the second recorded and replayed)
    assert rec.nodes > 0


def test_a_case_that_decides_otherwise_is_evaluated_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-finite input takes the general contraction path: the recording's guards
    fail, the case is evaluated as usual (the same results as without recordings)."""
    monkeypatch.setenv(MODE_VARIABLE, "replay")
    for seed in (1, 2):
        recorded.reference(OP, _tensors(_case(seed)), PARAMS, MODEL)
    odd = _case(3, special=float("inf"))
    got = recorded.reference(OP, _tensors(odd), PARAMS, MODEL)
    _assert_bits(got, OP.reference(_tensors(odd), PARAMS, MODEL))
    (rec,) = recorded.recordings(OP).kept.values()
    assert rec.replays == 1 and rec.refused == 1


def test_other_arrays_and_mode_off_are_not_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "replay")
    for seed in (1, 2, 3):
        got = recorded.reference(OP, _case(seed), PARAMS, MODEL)
        assert all(isinstance(t.value, np.ndarray) for t in got.values())
    assert not recorded.recordings(OP).kept and not recorded.recordings(OP).seen
    monkeypatch.setenv(MODE_VARIABLE, "off")
    for seed in (1, 2, 3):
        recorded.reference(OP, _tensors(_case(seed)), PARAMS, MODEL)
    assert not recorded.recordings(OP).seen


def test_the_signature_holds_the_parameters_and_the_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two precision models: two signatures, each recorded at its own second case."""
    monkeypatch.setenv(MODE_VARIABLE, "replay")
    for seed in (1, 2, 3):
        for name in ("fp32", "bf16"):
            got = recorded.reference(OP, _tensors(_case(seed)), PARAMS, get_model(name))
            _assert_bits(got, OP.reference(_tensors(_case(seed)), PARAMS, get_model(name)))
    kept = recorded.recordings(OP).kept
    assert len(kept) == 2 and all(r.replays == 2 for r in kept.values())


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["compile", "graphs"])
def test_a_compiled_replay_on_a_gpu_bounds_what_the_evaluation_bounds(
        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA device, a compiled replay of a new case: its values within the
    evaluation's own error of the evaluation's, its radii at least the evaluation's."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cases = [{k: v.cuda() for k, v in _tensors(_case(seed)).items()} for seed in (1, 2, 3)]
    truth = OP.reference(cases[2], PARAMS, MODEL)
    monkeypatch.setenv(MODE_VARIABLE, how)
    for case in cases:
        got = recorded.reference(OP, case, PARAMS, MODEL)
    (rec,) = recorded.recordings(OP).kept.values()
    assert rec.compiled is not None and rec.replays == 2, rec.failed_sources
    assert_bounds_what_it_bounds(truth, got)


@pytest.mark.gpu
def test_the_judge_replays_a_large_case_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A case above the GPU's share of work is evaluated on the GPU in torch's tensors
    where recordings are switched on: its verdicts are those of the evaluation without
    them, case after case (the later ones replayed)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from numoracle.cases.case import Case  # noqa: PLC0415
    from numoracle.checking.check import judge  # noqa: PLC0415

    params = OP.validate({"batch": 128, "in_features": 1024, "out_features": 1024,
                         "bias": True})
    case = Case(op="linear", params=params)
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        inputs = {k: rng.standard_normal(s).astype(np.float32).astype(np.float64)
                  for k, s in OP.input_shapes(params).items()}
        want = OP.reference(inputs, params, MODEL)
        got = {k: np.asarray(to_numpy(t.value), dtype=np.float32) for k, t in want.items()}
        got["y"].flat[7] += 1.0  # (one element off, by 25 of its bounds: each verdict sees it)
        monkeypatch.setenv(MODE_VARIABLE, "off")
        plain = judge(case, MODEL, inputs, got, with_diagnosis=False)
        monkeypatch.setenv(MODE_VARIABLE, "replay")
        replayed = judge(case, MODEL, inputs, got, with_diagnosis=False)
        assert {k: v.passed for k, v in plain.items()} == {k: v.passed for k, v in replayed.items()}
        assert not replayed["y"].passed
    kept = recorded.recordings(OP).kept.values()  # (the claimed model's, the diagnosis's)
    assert kept and all(r.replays == 2 for r in kept), [r.failed_sources for r in kept]
