"""Structured diagnoses and faults: the class a store keeps comes from their
fields, and a failure is classed by its most specific output."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import json

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.checking.diagnosis import (
    Diagnosis,
    DiagnosisKind,
    Fault,
    FaultKind,
    failure_class,
    most_specific,
)
from numoracle.checking.verdict import candidates
from numoracle.oracle.precision import get_model
from numoracle.outcome import Outcome
from numoracle.running.runner import TargetResult
from numoracle.store.store import signature
from numoracle.targets.target import Target

TF32 = get_model("tf32")
LINEAR = Case("linear", {"batch": 3, "in_features": 5, "out_features": 4, "bias": False},
              family="normal", seed=3)


def test_a_diagnosis_reads_as_its_sentence_and_classes_by_its_fields() -> None:
    d = Diagnosis("precision", "exceeds fp32; consistent with tf32", model=TF32)
    assert str(d) == "exceeds fp32; consistent with tf32" and "tf32" in d and d
    assert d.cls == "precision:tf32" and not d.ambiguous
    both = Diagnosis("precision", "exceeds fp32; consistent with tf32 or fp32-fp16in",
                     model=TF32, alternatives=(get_model("fp32-fp16in"),))
    assert both.ambiguous and both.cls == "precision:tf32"
    advised = d.with_advice("Claim tf32.")
    assert str(advised).endswith(". Claim tf32.") and advised.cls == d.cls
    assert not Diagnosis() and Diagnosis().cls == "other"
    assert pickle.loads(pickle.dumps(both)) == both


def test_a_logic_bug_in_any_output_makes_the_failure_a_logic_bug() -> None:
    prec = Diagnosis("precision", "consistent with fp32-acc16", model=get_model("fp32-acc16"))
    logic = Diagnosis("logic", "exceeds every precision model: a logic bug")
    assert most_specific([("y", prec), ("grad_input", logic), ("grad_coef", logic)]) == \
        ("grad_input", logic)
    assert failure_class(None, [prec, logic]) == "logic"
    assert failure_class(None, [prec]) == "precision:fp32-acc16"


@pytest.mark.parametrize(("fault", "cls"), [
    (Fault("the kernel raised ValueError: boom", "raise", exception="ValueError"),
     "error:raised ValueError"),
    (Fault("the kernel did not return within the timeout of 1 s", "hang"), "error:hang"),
    (Fault("output 'y': expected shape (2,), got (1,)", "output"), "error:output"),
])
def test_a_fault_classes_by_its_kind(fault: Fault, cls: str) -> None:
    assert failure_class(fault, []) == cls
    assert pickle.loads(pickle.dumps(fault)) == fault


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="kind='weird'"):
        Diagnosis("weird", "text")
    with pytest.raises(ValueError, match="kind='weird'"):
        Fault("text", "weird")


def test_candidates_carry_models_named_as_listed() -> None:
    for name, model in candidates(get_model("fp32")):
        assert model.name == name
    names = [n for n, _ in candidates(get_model("fp32"))]
    assert names[:3] == ["fp32", "fp32+flushed-subnormals", "fp32+bias-after-store"]


def _linear(mutate):
    def kernel(x, weight, grad_output):
        out = {"y": (x @ weight.T).astype(np.float32),
               "grad_input": (grad_output @ weight).astype(np.float32),
               "grad_weight": (grad_output.T @ x).astype(np.float32)}
        mutate(out)
        return out
    return Target(name="k", op="linear", backend="numpy", precision=get_model("fp32"),
                  fn=kernel)


def test_the_signature_takes_the_most_specific_output_not_the_first() -> None:
    def mutate(out):
        out["y"] = (out["y"].astype(np.float64) * (1 + 2.0**-12)).astype(np.float32)
        out["grad_weight"] = out["grad_weight"] + 1.0  # far beyond every model
    v = check_case(LINEAR, _linear(mutate))
    assert not v.passed
    assert v.outputs["y"].diagnosis.kind == "precision"
    assert v.outputs["grad_weight"].diagnosis.kind == "logic"
    assert v.cause is not None and v.cause[0] == "grad_weight"
    assert signature(v)["diagnosis"] == "logic" and v.failure_class == "logic"
    assert v.diagnosis.startswith("grad_weight: ")


def test_a_verdict_carries_the_claimed_model_itself() -> None:
    custom = get_model("fp32", order="pairwise").with_(name="my-pairwise")
    t = Target(name="k", op="matmul", backend="numpy", precision=custom,
               fn=lambda a, b: {"out": a @ b})
    v = check_case(Case("matmul", {"batch_shape": (), "m": 2, "k": 3, "n": 2}), t)
    assert v.passed and v.model is custom and v.precision == "my-pairwise"


def test_kinds_are_enums_in_the_process_and_strings_when_saved() -> None:
    d = Diagnosis("logic", "wrong index")  # a saved string is read back as its member
    f = Fault("the kernel hung", "hang")
    assert d.kind is DiagnosisKind.LOGIC and f.kind is FaultKind.HANG
    assert type(d.to_dict()["kind"]) is str  # saved as the plain string
    saved = json.loads(json.dumps({"diagnosis": d.to_dict(), "fault": f.kind}))
    assert saved["diagnosis"]["kind"] == "logic" and saved["fault"] == "hang"
    assert Diagnosis(saved["diagnosis"]["kind"], d.text) == d
    with pytest.raises(ValueError, match="kind='bogus' must be one of"):
        Diagnosis("bogus")


@pytest.mark.parametrize(("verdict", "cases", "outcome"), [
    ("pass", 3, Outcome.PASS), ("FAIL", 1, Outcome.FAIL), ("skipped", 0, Outcome.SKIPPED),
    ("error", 2, Outcome.UNJUDGED), ("pass", 0, Outcome.UNJUDGED),
])
def test_a_rows_outcome_is_one_enum_saved_as_its_string(verdict: str, cases: int,
                                                         outcome: Outcome) -> None:
    r = TargetResult("k", "matmul", "fp32", cases=cases, verdict=verdict)
    assert r.status()[0] is outcome
    row = json.loads(json.dumps(r.row()))
    assert row["status"] == outcome.value and Outcome.read(row["status"]) is outcome
    assert Outcome.read(row["verdict"]) is Outcome.read(verdict)  # a run's verdict read back
