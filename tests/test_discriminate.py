"""Causes one case cannot tell apart are told apart by the cases that can:
fp16 partial sums, fp16 inputs, TF32 inputs and run-to-run noise each get
their own name, in the headline, the store's class and ``effective()``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.targets.target import Target
from numoracle.checking.check import check_case
from numoracle.checking.discriminate import PROBES, discriminate, probe_inputs
from numoracle.oracle.formats import quantize
from numoracle.oracle.precision import get_model
from numoracle.reports.html_report import render_html
from numoracle.running.runner import default_strategy, run_target
from numoracle.store.store import entries

CASE = Case("linear", {"batch": 4, "in_features": 64, "out_features": 4, "bias": False},
            family="normal", seed=1)
#: where fp16 accumulation fits fp32-acc16 far better than tf32, yet tf32 fits too
LONG = Case("linear", {"batch": 16, "in_features": 512, "out_features": 16, "bias": False},
            family="normal", seed=1)


def _mm_acc16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for i in range(a.shape[1]):
        acc = (acc.astype(np.float32) + np.outer(a[:, i], b[i, :]).astype(np.float32)
               ).astype(np.float16)
    return acc.astype(np.float32)


def _rounded(fmt: str):
    def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (quantize(a.astype(np.float64), fmt) @ quantize(b.astype(np.float64), fmt)
                ).astype(np.float32)
    return mm


def _kernel(mm):
    def linear(x, weight, grad_output):
        return {"y": mm(x, weight.T), "grad_input": mm(grad_output, weight),
                "grad_weight": mm(grad_output.T, x)}
    return linear


_CALLS = [0]


def _noisy(x, weight, grad_output):
    """Random +-1 ulp on every output element, other noise on every call."""
    _CALLS[0] += 1
    rng = np.random.default_rng(_CALLS[0])
    out = _kernel(_rounded("fp32"))(x, weight, grad_output)
    for k, v in out.items():
        step = rng.integers(-1, 2, size=v.shape)
        out[k] = np.where(step > 0, np.nextafter(v, np.float32(np.inf)),
                          np.where(step < 0, np.nextafter(v, np.float32(-np.inf)), v)
                          ).astype(np.float32)
    return out


def _target(fn) -> Target:
    return Target(name="k", op="linear", backend="numpy", precision=get_model("fp32"), fn=fn)


@pytest.mark.parametrize(("mm", "cause", "case"), [
    (_mm_acc16, "fp32-acc16", CASE),
    (_mm_acc16, "fp32-acc16", LONG),
    (_rounded("fp16"), "fp32-fp16in", CASE),
    (_rounded("fp16"), "fp32-fp16in", LONG),
    (_rounded("tf32"), "tf32", CASE),
])
def test_probes_name_the_cause_that_one_case_could_not(mm, cause: str, case: Case) -> None:
    target = _target(_kernel(mm))
    v = check_case(case, target)
    failing = [o for o in v.outputs.values() if not o.passed]
    assert failing
    ambiguous = [o for o in failing if o.diagnosis.ambiguous]
    assert ambiguous, [str(o.diagnosis) for o in failing]  # the first case cannot tell
    assert "cannot tell them apart" in v.diagnosis
    found = discriminate(v, target)
    assert found.probes == [p for p, _, _ in PROBES]
    for o in ambiguous:
        d = o.diagnosis
        assert d.kind == "precision" and d.model is not None and d.model.name == cause, str(d)
        assert not d.ambiguous and f"consistent with {cause} (" in d


def test_a_correct_kernel_fits_the_claim_on_every_probe() -> None:
    target = _target(_kernel(_rounded("fp32")))
    for probe, _, _ in PROBES:
        ins = probe_inputs(CASE, probe)
        v = check_case(CASE, target, inputs=ins)
        assert v.passed, (probe, v.diagnosis)


def test_run_to_run_noise_is_named_nondeterminism(tmp_path: Path) -> None:
    _CALLS[0] = 0
    res = run_target(_target(_noisy), examples=20, seed=0, store=tmp_path, diagnose=True)
    assert res.verdict == "FAIL"
    assert "changes from run to run" in res.diagnosis and "tf32" not in res.diagnosis
    assert res.diagnoses and all(res.effective()[name] == "nondeterministic"
                                 for name in res.diagnoses)
    (e,) = entries(tmp_path)
    assert e.signature["diagnosis"] == "nondeterministic"


def test_effective_agrees_with_the_headline(tmp_path: Path) -> None:
    target = _target(_kernel(_mm_acc16))
    res = run_target(target, examples=20, seed=0, store=tmp_path, diagnose=True,
                     strategy=default_strategy(target, max_elements=2000))
    assert res.verdict == "FAIL" and "consistent with fp32-acc16 (" in res.diagnosis
    cause = res.failure.cause if res.failure is not None else None
    assert cause is not None and res.effective()[cause[0]] == "fp32-acc16"
    (e,) = entries(tmp_path)
    assert e.signature["diagnosis"] == "precision:fp32-acc16"
    page = render_html([res])  # the report reads the structured diagnosis
    assert f"<td>{cause[0]}</td><td>precision</td><td>fp32-acc16</td>" in page
