"""A bound that lets zeros pass because of the claimed order: the verdict names
the order and judges under the one a GPU reduction keeps, saying so."""

from __future__ import annotations

import pytest
import torch

from numoracle import check_kernel, get_model
from numoracle.checking.verdict import degenerate_order
from numoracle.errors import KernelMismatch
from numoracle.oracle.precision import Order, device_order

# bf16 accumulation: any order of 600 terms has gamma_599(2^-8) infinite
BF16_SUMS = get_model("fp32", accumulate="bf16", name="fp32-accbf16")
KW = {"reference": lambda x: x.abs().sum(-1), "inputs": {"x": ("rows", "n")},
      "dims": {"rows": (1, 2), "n": (600, 700)}, "precision": BF16_SUMS,
      "backend": "torch-cpu", "examples": 5, "store": None}


def test_zeros_fail_under_the_device_order_and_the_verdict_says_why():
    def zeros(x):
        return {"out": torch.zeros(x.shape[:-1])}

    with pytest.raises(KernelMismatch) as info:
        check_kernel(zeros, op="degenerate_zeros", **KW)
    text = str(info.value)
    assert "the claimed order any leaves n = " in text and "zeros would pass" in text
    assert "judged under blocked(" in text


def test_a_correct_sum_passes_under_the_device_order():
    def good(x):
        return {"out": x.abs().sum(-1)}

    assert check_kernel(good, op="degenerate_good", **KW).verdict == "pass"


def test_the_device_order_is_a_warp_of_lanes():
    assert device_order(1 << 24) == Order("blocked", 1 << 19)
    assert degenerate_order(get_model("fp32", order="pairwise"), 1 << 24) is None
    assert degenerate_order(get_model("fp32"), 16) is None  # blocked(1) is no shorter
    m = degenerate_order(get_model("fp32"), 1 << 24)
    assert m is not None and m.order == Order("blocked", 1 << 19) and "@blocked" in m.name
