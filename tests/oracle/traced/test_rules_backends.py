"""Every rule of the traced library computes the same in NumPy and in torch's namespace:
each checked case of the ``test_rules_*`` modules is run on NumPy and on torch (float64
tensors on the CPU here; on CUDA, and in CuPy, in the ``gpu``-marked tests) and the values
and radii compared (equal, or within the oracle's own error). A case given device inputs
(CuPy's, as the judge hands a large one, or torch's CUDA tensors) is evaluated on its GPU
in the namespace :func:`~numoracle.oracle.xp.gpu_namespace` names and handed back in the
inputs' namespace."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from traced_rulecheck import RuleCase

import numoracle.oracle.traced.library  # noqa: F401  (registers the rules)
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import RuleContext, lookup
from numoracle.oracle.traced.library._common import as_judged
from numoracle.oracle.tracked import Tracked, exact
from numoracle.oracle.xp import array_module, as_namespace, namespace_named, on_device, to_numpy


def _cases() -> list[RuleCase]:
    out: list[RuleCase] = []
    for path in sorted(Path(__file__).parent.glob("test_rules_*.py")):
        if path.stem in ("test_rules_registry", Path(__file__).stem):
            continue
        out += list(getattr(importlib.import_module(path.stem), "CASES", ()))
    return out


CASES = _cases()
#: how far one namespace's radius may lie from another's, relatively
RADIUS_SHARE = 2.0**-10


def _arg(a: Any, xp: Any, device: Any) -> Any:
    """A case's argument as the interpreter hands it to a rule in ``xp``."""
    if isinstance(a, torch.Tensor):
        if a.is_floating_point():
            return exact(as_namespace(a.detach().double().numpy(), xp, device))
        return a.numpy().copy()
    if isinstance(a, (list, tuple)) and a and any(isinstance(x, torch.Tensor) for x in a):
        return [_arg(x, xp, device) for x in a]
    return a


def _run(case: RuleCase, xp: Any, device: Any = None) -> tuple[Any, ...]:
    ctx = RuleContext(get_model(case.model), case.claims, xp=xp, device=device)
    with on_device(xp, device):
        out = lookup(case.name)(ctx, *[_arg(a, xp, device) for a in case.args], **case.kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _field(t: Tracked, name: str) -> np.ndarray:
    return np.broadcast_to(np.asarray(to_numpy(getattr(t, name)), dtype=np.float64),
                           t.shape).copy()


def _agree(case: RuleCase, host: Any, other: Any, xp: Any) -> None:
    if not isinstance(host, Tracked):
        if isinstance(other, Tracked):
            raise AssertionError(f"{case}: a tracked result on {xp!r}, a plain one on NumPy")
        a, b = np.asarray(host), np.asarray(to_numpy(other))
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (
            f"{case}: {a} on NumPy, {b} on {xp!r}")
        return
    assert isinstance(other, Tracked), f"{case}: a plain result on {xp!r}"
    assert array_module(other.value) is xp, (
        f"{case}: the result left {xp!r}: {type(other.value).__name__}")
    h, o = as_judged(host), as_judged(other).to_host()
    assert h.shape == o.shape, (case, h.shape, o.shape)
    hv = _field(h, "value") + (0.0 if h.lo is None else _field(h, "lo"))
    ov = _field(o, "value") + (0.0 if o.lo is None else _field(o, "lo"))
    slack = _field(h, "ref_err") + _field(o, "ref_err")
    # an unjudged element (NaN radii on both) still has the float64 value of each
    slack = np.where(np.isnan(slack), 2.0**-40 * np.abs(hv), slack)
    with np.errstate(invalid="ignore"):
        same = (hv == ov) | (np.isnan(hv) & np.isnan(ov)) | (np.abs(hv - ov) <= slack)
    assert same.all(), (f"{case}: values differ beyond the oracle's error at "
                        f"{np.argwhere(~same)[:3].tolist()}: {hv[~same][:3]} vs {ov[~same][:3]}")
    for name in ("det", "prob", "ref_err"):
        a, b = _field(h, name), _field(o, name)
        # radii follow values that may differ in their last bits, and NumPy sums a
        # contraction's magnitudes in float32 where torch sums them in float64 (the
        # bound up to 2^-11 of itself sharper: numoracle.oracle.tracked.SINGLE_SUMS)
        with np.errstate(invalid="ignore"):
            close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                np.abs(a - b) <= RADIUS_SHARE * np.maximum(np.abs(a), np.abs(b)) + slack)
        assert close.all(), (f"{case}: {name} differs at {np.argwhere(~close)[:3].tolist()}: "
                             f"{a[~close][:3]} vs {b[~close][:3]}")


def _compare(case: RuleCase, xp: Any, device: Any = None) -> None:
    host = _run(case, np)
    other = _run(case, xp, device)
    assert len(host) == len(other), case
    for h, o in zip(host, other, strict=True):
        _agree(case, h, o, xp)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule_on_torch_cpu_agrees_with_numpy(case: RuleCase) -> None:
    _compare(case, namespace_named("torch"), "cpu")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule_in_a_strict_namespace_agrees_with_numpy(case: RuleCase, strict: Any) -> None:
    """CuPy's manners on the CPU (strict_xp: no host array beside its arrays, no number
    where an array is wanted, no implicit conversion): every rule runs there as on
    the host."""
    _compare(case, strict)


def _cuda() -> bool:
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule_on_torch_cuda_agrees_with_numpy(case: RuleCase) -> None:
    _compare(case, namespace_named("torch"), "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule_on_cupy_agrees_with_numpy(case: RuleCase, cupy: Any) -> None:
    """CuPy is where a GPU's references are evaluated when it works: every rule there
    as on the host (its float64 keeps subnormals, so it finds the same exact elements)."""
    from numoracle.oracle.xp import keeps_subnormals

    assert keeps_subnormals(cupy)
    _compare(case, cupy)



# -- whole references: the interpreter in a namespace, and a GPU case's placement ------

def _block(x, w, b, g, beta):
    """An MLP block with a residual, a layer norm and a softmax: most rule families."""
    h = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))
    y = torch.nn.functional.layer_norm(h + x, (x.shape[-1],), g, beta)
    return torch.softmax(y, dim=-1)


def _block_op():
    from numoracle.oracle.traced.op import TracedOp

    return TracedOp(_block, inputs={"x": ("batch", "n"), "w": ("n", "n"), "b": ("n",),
                                    "g": ("n",), "beta": ("n",)},
                    grads=("x", "w"), name="backends_block")


def _block_inputs(op, params):
    from numoracle.oracle.formats import quantize

    rng = np.random.default_rng(7)
    return {k: quantize(rng.standard_normal(s), "fp32")
            for k, s in op.input_shapes(params).items()}


def _same_tracked(host: Tracked, other: Tracked, what: str) -> None:
    case = RuleCase(what, ())
    _agree(case, host, other, other.xp)


def test_a_reference_with_gradients_evaluated_on_torch_agrees_with_numpy() -> None:
    from numoracle.oracle.traced.capture import capture
    from numoracle.oracle.traced.interpret import evaluate

    op = _block_op()
    params = {"batch": 3, "n": 16}
    inputs = _block_inputs(op, params)
    graph = capture(op.ref, {k: inputs[k] for k in op.ref.names},
                    {k: v for k, v in inputs.items() if k.startswith("grad_")})
    ctx = op.context(get_model("fp32"))
    host = evaluate(graph, inputs, ctx)
    torch_xp = namespace_named("torch")
    other = evaluate(graph, inputs, RuleContext(ctx.model, ctx.claims, xp=torch_xp,
                                                device="cpu"))
    assert set(host) == set(other) == {"out", "grad_x", "grad_w"}
    for name in host:
        assert array_module(other[name].value) is torch_xp, name
        _same_tracked(host[name], other[name], name)


def table_case(name: str, backward: bool, label: str) -> tuple[Any, dict[str, Any], Any]:
    """The cost table's reference ``name`` at its small size (with its gradients where
    ``backward``): its captured graph, host inputs and fp32 rule context."""
    from benchmarks.traced.table import REFERENCES, _inputs

    from numoracle.oracle.traced.capture import capture
    from numoracle.oracle.traced.op import TracedOp

    fn, grads = REFERENCES[name]
    rng = np.random.default_rng(0)
    inputs = _inputs(name, "small", rng)
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in inputs.items()},
                  grads=grads if backward else (), name=label)
    for k, shape in op.input_shapes({}).items():
        inputs.setdefault(k, rng.standard_normal(shape).astype(np.float32).astype(np.float64))
    graph = capture(op.ref, {k: inputs[k] for k in op.ref.names},
                    {k: v for k, v in inputs.items() if k.startswith("grad_")})
    return graph, inputs, op.context(get_model("fp32"))


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "fwd+bwd"])
@pytest.mark.parametrize("name", ["softmax", "layer_norm", "attention", "conv_bn_relu", "mlp",
                                  "cross_entropy"])
def test_a_whole_reference_in_a_strict_namespace_agrees_with_numpy(
        name: str, backward: bool, strict: Any) -> None:
    """The cost table's references (small sizes) evaluated in CuPy's manners on the CPU:
    every rule they reach, and the interpreter between them, keep to the namespace."""
    from numoracle.oracle.traced.interpret import evaluate

    graph, inputs, ctx = table_case(name, backward, f"strict_{name}_{int(backward)}")
    host = evaluate(graph, inputs, ctx)
    other = evaluate(graph, {k: strict.asarray(v) if v.dtype.kind == "f" else v
                             for k, v in inputs.items()},
                     RuleContext(ctx.model, ctx.claims, xp=strict))
    assert set(host) == set(other)
    for out in host:
        assert array_module(other[out].value) is strict, out
        _same_tracked(host[out], other[out], f"{name} {out}")


def test_the_gpu_namespace_switch_refuses_an_unknown_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from numoracle.errors import InvalidArgument
    from numoracle.oracle.xp import GPU_NAMESPACE_VARIABLE, gpu_namespace, is_torch

    monkeypatch.setenv(GPU_NAMESPACE_VARIABLE, "torch")
    assert is_torch(gpu_namespace())
    monkeypatch.setenv(GPU_NAMESPACE_VARIABLE, "jax")
    with pytest.raises(InvalidArgument, match="NUMORACLE_GPU_NAMESPACE='jax' is unknown"):
        gpu_namespace()


def test_the_gpu_namespace_is_cupy_where_it_works_else_torchs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from numoracle.errors import InvalidArgument
    from numoracle.oracle import xp as xp_module

    monkeypatch.delenv(xp_module.GPU_NAMESPACE_VARIABLE, raising=False)
    cupy, _ = xp_module._cupy_state()
    if cupy is None:  # (no CuPy here, or no device it computes on)
        assert xp_module.is_torch(xp_module.gpu_namespace())
        monkeypatch.setenv(xp_module.GPU_NAMESPACE_VARIABLE, "cupy")
        with pytest.raises(InvalidArgument, match="CuPy does not import or compute"):
            xp_module.gpu_namespace()
    else:
        assert xp_module.gpu_namespace() is cupy


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("namespace", ["cupy", "torch"])
def test_a_reference_given_cuda_tensors_is_evaluated_where_the_switch_says(
        namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's CUDA tensors in, evaluated in CuPy (shared through DLPack) or in torch's
    namespace as the switch says, handed back in torch's namespace on that GPU."""
    if namespace == "cupy":
        pytest.importorskip("cupy")
    from numoracle.oracle.traced import interpret
    from numoracle.oracle.xp import GPU_NAMESPACE_VARIABLE, is_torch

    monkeypatch.setenv(GPU_NAMESPACE_VARIABLE, namespace)
    seen: list[str] = []
    evaluate = interpret._evaluate

    def spy(graph: Any, inputs: Any, ctx: Any, outputs: Any, consume: bool = False) -> Any:
        seen.append("torch" if is_torch(ctx.xp) else ctx.xp.__name__)
        return evaluate(graph, inputs, ctx, outputs, consume)

    monkeypatch.setattr(interpret, "_evaluate", spy)
    op = _block_op()
    params = {"batch": 4, "n": 64}
    inputs = _block_inputs(op, params)
    model = get_model("fp32")
    host = op.reference(inputs, params, model)
    dev = op.reference({k: torch.from_numpy(v).cuda() for k, v in inputs.items()}, params,
                       model)
    assert seen[-1] == namespace
    for name in host:
        assert is_torch(dev[name].xp), name  # handed back where given
        assert dev[name].xp.tensor(dev[name].value).device.type == "cuda", name
        _same_tracked(host[name], dev[name], name)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_a_reference_given_device_inputs_is_evaluated_there() -> None:
    cupy = pytest.importorskip("cupy")
    op = _block_op()
    params = {"batch": 4, "n": 64}
    inputs = _block_inputs(op, params)
    model = get_model("fp32")
    host = op.reference(inputs, params, model)
    dev = op.reference({k: cupy.asarray(v) for k, v in inputs.items()}, params, model)
    for name in host:
        assert array_module(dev[name].value) is cupy, name  # handed back where given
        _same_tracked(host[name], dev[name], name)
