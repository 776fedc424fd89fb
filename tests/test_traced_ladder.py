"""The traced diagnosis discriminates: each kernel departs from fp32 arithmetic in
one way, and the headline names that way (the most precise model that fits);
a logic bug only when no model fits. The kernels are those of
``benchmarks/claims_ladder.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.claims_ladder import (
    approx_division,
    approx_swiglu,
    bf16_accumulation,
    bf16_stored_softmax,
    bf16_summed_softmax,
    divide,
    dropped_term,
    fp16_accumulation,
    linear,
    nondeterministic,
    row_sum,
    softmax,
    swiglu,
    tf32_inputs,
)
from numoracle import check_kernel
from numoracle.checking.verdict import candidates, traced_ladder
from numoracle.errors import KernelMismatch
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import Claims

ROWS = {"x": ("rows", "n")}
SMALL = {"rows": (1, 4), "n": (2, 64)}


def _diagnosis(kernel, reference, inputs, dims, op):
    with pytest.raises(KernelMismatch) as info:
        check_kernel(kernel, reference=reference, inputs=inputs, dims=dims, op=op,
                     precision="fp32", backend="torch-cpu", examples=20, store=None)
    v = info.value.verdict
    return next(o.diagnosis for o in v.outputs.values() if not o.passed)


@pytest.mark.parametrize("kernel, reference, inputs, dims, rung", [
    (approx_division, divide, {"x": ("rows", "n"), "y": ("rows", "n")}, SMALL,
     "approximate-elementwise"),
    (approx_swiglu, swiglu, {"a": ("rows", "n"), "b": ("rows", "n")}, SMALL,
     "approximate-elementwise"),
    (bf16_accumulation, row_sum, ROWS, SMALL, "bf16-accumulation"),
    (bf16_summed_softmax, softmax, ROWS, SMALL, "bf16-accumulation"),
    (bf16_stored_softmax, softmax, ROWS, SMALL, "bf16-rounding-per-op"),
    (tf32_inputs, linear, {"x": ("rows", "n"), "w": ("o", "n")}, {**SMALL, "o": (1, 4)},
     "tf32-inputs"),
], ids=["approximate-division", "approximate-swiglu", "bf16-accumulation",
        "bf16-summed-softmax", "bf16-storage", "tf32"])
def test_each_rung_names_the_kernel_that_does_it(kernel, reference, inputs, dims, rung):
    d = _diagnosis(kernel, reference, inputs, dims, f"ladder_t_{kernel.__name__}")
    assert d.kind == "precision" and d.model is not None
    assert d.model.name == f"fp32+{rung}", str(d)
    assert f"fp32+{rung}" in str(d)


def test_fp16_accumulation_is_named_as_fp16_accumulation():
    d = _diagnosis(fp16_accumulation, softmax, ROWS, SMALL, "ladder_t_fp16_acc")
    assert d.kind == "precision" and d.model is not None
    assert d.model.name == "fp32+fp16-accumulation", str(d)


def test_outputs_off_the_bf16_grid_rule_out_bf16_storage():
    """A softmax summing its denominator in bf16 returns fp32 values: rounding every
    op to bf16 (bf16 storage) fits its error but not its values, and is ruled out by
    name; one rounding every op to bf16 returns bf16 values, which rank that model
    first."""
    d = _diagnosis(bf16_summed_softmax, softmax, ROWS, SMALL, "ladder_t_bf16_sum_grid")
    assert d.model.name == "fp32+bf16-accumulation", str(d)
    assert "fp32+bf16-rounding-per-op ruled out: it stores every result in bf16" in str(d)
    per_op = _diagnosis(bf16_stored_softmax, softmax, ROWS, SMALL, "ladder_t_per_op_grid")
    assert per_op.model.name == "fp32+bf16-rounding-per-op", str(per_op)
    assert "ruled out: it stores" not in str(per_op)



def test_the_storage_grid_reads_values_not_errors():
    from numoracle.checking.storage_grid import off_grid, on_grid  # noqa: PLC0415

    fp32, per_op = get_model("fp32"), get_model("fp32", storage="bf16")
    summed = get_model("fp32", summation="bf16")
    on = np.array([0.5, 0.75, 1.0 + 2.0**-7, np.nan])  # bf16 values (NaN not counted)
    off = np.array([0.5, 1.0 + 2.0**-12, np.inf])
    assert off_grid(on, per_op, fp32) == (0, 3) and off_grid(off, per_op, fp32) == (1, 2)
    assert off_grid(off, summed, fp32) == (0, 2)  # fp32 storage: any fp32 value
    exact_off = np.array([0.5 + 2.0**-12, 0.75 + 2.0**-12, 1.0, 0.0])
    assert on_grid(on, exact_off, per_op, fp32)
    assert not on_grid(on, np.array([0.5, 0.75, 1.0, 0.0]), per_op, fp32)  # says nothing
    assert not on_grid(on, np.array([0.5 + 2.0**-12, 0.75, 1.0, 0.0]), per_op, fp32)  # chance
    assert not on_grid(on, exact_off, summed, fp32)


def test_nondeterminism_is_found_by_reruns():
    d = _diagnosis(nondeterministic, row_sum, ROWS, SMALL, "ladder_t_nondet")
    assert d.kind == "nondeterministic"


def test_a_logic_bug_is_one_only_when_no_model_fits():
    d = _diagnosis(dropped_term, softmax, ROWS, SMALL, "ladder_t_logic")
    assert d.kind == "logic" and "every coarser model tried" in str(d)


def test_the_ladder_offers_only_coarser_claims():
    fp32 = [name for name, _ in traced_ladder(get_model("fp32"))]
    assert fp32 == ["fp32+approximate-elementwise", "fp32+one-pass-variance",
                    "fp32+tf32-inputs", "fp32+fp16-inputs", "fp32+fp16-accumulation",
                    "fp32+fp16-rounding-per-op", "fp32+fp16-arithmetic",
                    "fp32+bf16-accumulation", "fp32+bf16-rounding-per-op",
                    "fp32+bf16-arithmetic"]
    bf16 = [name for name, _ in traced_ladder(get_model("bf16"))]
    assert bf16 == ["bf16+approximate-elementwise", "bf16+one-pass-variance",
                    "bf16+fp16-accumulation", "bf16+fp16-arithmetic",
                    "bf16+bf16-accumulation", "bf16+bf16-arithmetic"]
    summed = dict(traced_ladder(get_model("fp32")))["fp32+bf16-accumulation"]
    assert summed.summing().accumulate.name == "bf16" and summed.accumulate.name == "fp32"
    fused = [name for name, _ in traced_ladder(get_model("bf16", rounding="fused"))]
    assert "bf16+bf16-rounding-per-op" in fused
    one_pass = [name for name, _ in traced_ladder(get_model("fp32", variance="one-pass"))]
    assert not any("one-pass" in n for n in one_pass)
    triton = [name for name, _ in traced_ladder(get_model("triton"))]
    assert not any("approximate" in n for n in triton)
    names = [name for name, _ in candidates(get_model("fp32"), ladder="traced")]
    assert names[:2] == ["fp32", "fp32+flushed-subnormals"]


def test_exact_and_unjudged_elements_leave_a_fit_informative():
    """A rung explains a failing element by a bound below its value's size; elements
    the kernel got exactly (error 0, bound 0: a zero) or that the claim leaves
    unjudged (a NaN bound) are no failures, and do not make the rung look vacuous."""
    from numoracle.checking.verdict import _informative  # noqa: PLC0415 - a private helper
    from numoracle.oracle.tracked import bounded  # noqa: PLC0415

    value = np.array([0.0, 1.0, 2.0])
    claimed, model = get_model("fp32"), get_model("fp32", accuracy="triton")
    refs = {claimed.name: bounded(value, np.array([0.0, 1e-7, np.nan])),
            model.name: bounded(value, np.array([0.0, 1e-6, np.nan]))}
    got = np.array([0.0, 1.0 + 5e-7, 7.0])
    assert _informative(got, claimed, model, lambda m: refs[m.name])
    vacuous = {**refs, model.name: bounded(value, np.array([0.0, 2.0, np.nan]))}
    assert not _informative(got, claimed, model, lambda m: vacuous[m.name])


def _layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _one_pass_layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean
    return {"out": (x - mean) * torch.rsqrt(var + 1e-5) * w + b}


def test_a_one_pass_variance_is_named_by_its_claim():
    """A layer norm whose variance is E[x²] - E[x]² fails the two-pass claim, and the
    diagnosis names the claim that states it; under that claim it passes."""
    spec = {"reference": _layer_norm, "inputs": {"x": ("batch", "n"), "w": ("n",), "b": ("n",)},
            "dims": {"n": (1, 64)}, "backend": "torch-cpu", "store": None, "seed": 0}
    with pytest.raises(KernelMismatch) as info:
        check_kernel(_one_pass_layer_norm, examples=60, op="ladder_t_one_pass", **spec)
    d = next(o.diagnosis for o in info.value.verdict.outputs.values() if not o.passed)
    assert "fp32+one-pass-variance" in str(d) and 'variance="one-pass"' in str(d), str(d)
    r = check_kernel(_one_pass_layer_norm, examples=30, op="ladder_t_one_pass_claimed",
                     claims=Claims(variance="one-pass"), **spec)
    assert r.verdict == "pass"
