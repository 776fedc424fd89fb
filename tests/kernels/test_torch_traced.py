"""torch running a traced op's reference: correct targets that pass, found by
name for replay, with the precision flags pinned."""

from __future__ import annotations

import pytest
import torch

from numoracle import check_kernel
from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.errors import InvalidArgument
from numoracle.kernels import get_target
from numoracle.kernels.torch_traced import reference_targets
from numoracle.oracle.traced.op import traced_op


def block(x, w, b, gamma):
    h = torch.nn.functional.linear(x, w, b)
    return torch.softmax(h, -1) * gamma, torch.tanh(h).sum(0)


OP = traced_op(block, inputs={"x": ("batch", "i"), "w": ("o", "i"), "b": ("o",),
                              "gamma": ("o",)}, dims={"i": (1, 24), "o": (1, 24)},
               grads=("x", "w"), name="traced_block_targets")


@pytest.mark.parametrize("target", [t for t in reference_targets(OP.name)
                                    if t.backend == "torch-cpu"], ids=lambda t: t.name)
def test_torch_cpu_running_the_reference_passes(target):
    r = check_kernel(target.fn, op=OP.name, precision=target.precision, backend=target.backend,
                     examples=15, store=None, name=target.name)
    assert r.verdict == "pass" and r.cases == 15


def test_the_registry_finds_them_for_replay():
    t = get_target("torch-cpu-fp32", OP.name)
    case = Case(OP.name, {"batch": 3, "i": 5, "o": 4}, seed=2)
    v = check_case(case, t)
    assert v.passed, v.message()
    assert set(v.outputs) == {"out0", "out1", "grad_x", "grad_w"}
    with pytest.raises(InvalidArgument, match="torch-cpu-fp32"):
        get_target("no-such-target", OP.name)


def test_only_traced_ops_have_them():
    with pytest.raises(InvalidArgument, match="not made from a PyTorch reference"):
        reference_targets("linear")


@pytest.mark.gpu
def test_torch_cuda_running_the_reference_passes(torch_cuda):
    for target in reference_targets(OP.name):
        if target.backend != "torch-cuda" or target.unavailable_reason() is not None:
            continue
        r = check_kernel(target.fn, op=OP.name, precision=target.precision, backend=target.backend,
                         examples=15, store=None, name=target.name)
        assert r.verdict == "pass"


def test_a_scalar_output_and_its_gradient_reach_the_kernel_as_scalars():
    op = traced_op(torch.nn.functional.mse_loss, inputs={"input": ("n",), "target": ("n",)},
                   grads=("input",), name="traced_mse_targets")
    assert op.input_shapes({"n": 3})["grad_out"] == ()
    t = get_target("torch-cpu-fp32", op.name)
    r = check_kernel(t.fn, op=op.name, backend=t.backend, examples=10, store=None, name=t.name)
    assert r.verdict == "pass"
