"""The hand-written ops give in other namespaces what they give in NumPy: in torch's
(on the CPU here; a device array's implicit conversion to NumPy refused, as CuPy
refuses it) and on a GPU in CuPy's (a large case's reference is computed there), on
drawn cases; results in the inputs' namespace (linear, matmul, conv2d, optim and
mlp_train compute there; kan, kan_chain, logic_ca and logic_layer compute on the host
and hand their results back), values within the oracle's own error, radii within the
float32 magnitude sums' margin, and never a radius 0 where the host's is not (a zero
radius the host does not give would judge a kernel against an exact value it need not
meet)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from numoracle.cases.case import Case
from numoracle.errors import UnsupportedCase
from numoracle.kernels import all_targets
from numoracle.oracle import tracked
from numoracle.oracle.ops import OPS, get_op
from numoracle.oracle.precision import PrecisionModel, get_model
from numoracle.oracle.tracked import Tracked
from numoracle.oracle.xp import array_module, as_namespace, namespace_named, on_device
from numoracle.strategies.cases import cases

#: NumPy may sum a contraction's magnitudes in float32, torch and CuPy sum them in
#: float64: the bound up to 2^-11 of itself sharper (numoracle.oracle.tracked.SINGLE_SUMS)
RADIUS_SHARE = 2.0**-10


def _same_as_host(host: Mapping[str, Tracked], other: Mapping[str, Tracked], xp: Any,
                  where: str) -> None:
    """``other`` (references computed in ``xp``) against the host's, output by output."""
    assert set(host) == set(other)
    for name, h in host.items():
        o = other[name]
        assert array_module(o.value) is xp, f"{where}.{name} left {xp.__name__}'s namespace"
        o = o.to_host()
        shape = np.shape(h.value)
        hv, ov = (np.broadcast_to(t.value + (0.0 if t.lo is None else t.lo), shape)
                  for t in (h, o))
        slack = np.broadcast_to(h.ref_err + o.ref_err, shape)
        with np.errstate(invalid="ignore"):
            same = (hv == ov) | (np.isnan(hv) & np.isnan(ov)) | (np.abs(hv - ov) <= slack)
            assert same.all(), f"{where}.{name}: values differ beyond the oracle's error"
            for field in ("det", "prob"):
                a, b = (np.broadcast_to(getattr(t, field), shape) for t in (h, o))
                zero_here_only = (b == 0) & (a != 0)
                assert not zero_here_only.any(), (
                    f"{where}.{name}: {field} radius 0 at {int(zero_here_only.sum())} "
                    f"elements where the host's is not (e.g. {a[zero_here_only].flat[0]!r})")
                close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
                    np.abs(a - b) <= RADIUS_SHARE * np.maximum(np.abs(a), np.abs(b)))
                assert close.all(), f"{where}.{name}: {field} differs"


def _agree(case: Case, model: str) -> None:
    torch_xp = namespace_named("torch")
    op, m = get_op(case.op), get_model(model)
    inputs = case.inputs()
    host = op.reference(inputs, case.params, m)
    with on_device(torch_xp, "cpu"):
        given_ = {k: as_namespace(v, torch_xp) if np.asarray(v).dtype.kind == "f" else v
                  for k, v in inputs.items()}
        other = op.reference(given_, case.params, m)
    _same_as_host(host, other, torch_xp, case.op)


#: the hand-written ops (the registry also holds traced ops other test modules register
#: as they are imported, which would make the parameters depend on the import order)
HAND_WRITTEN = sorted(n for n, o in OPS.items()
                      if type(o).__module__.startswith("numoracle.oracle.ops."))


@pytest.mark.parametrize("op", ["linear", "matmul", "conv2d"])
def test_a_hand_written_op_in_torch_agrees_with_numpy(op: str) -> None:
    @settings(max_examples=2, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(op=op, storage=("fp32", "bf16"), max_elements=800))
    def check(case: Case) -> None:
        _agree(case, "bf16" if case.storage == "bf16" else "fp32")

    check()


def _models(op: str) -> list[PrecisionModel]:
    """The distinct precision models the op's targets claim (at most four)."""
    seen: dict[str, PrecisionModel] = {}
    for t in all_targets(op):
        seen.setdefault(t.precision.name, t.precision)
    return list(seen.values())[:4]


def _agree_in(xp: Any, case: Case, model: PrecisionModel) -> None:
    """A drawn case's references with its float inputs in ``xp`` (CuPy's on the
    current GPU, torch's on its default device) against the host's."""
    op = get_op(case.op)
    inputs = case.inputs()
    dev_inputs = {k: as_namespace(v, xp) if np.asarray(v).dtype.kind == "f" else v
                  for k, v in inputs.items()}
    try:
        host = op.reference(inputs, case.params, model)
    except UnsupportedCase:  # not judged on the host: nor on the device
        with pytest.raises(UnsupportedCase):
            op.reference(dev_inputs, case.params, model)
        return
    _same_as_host(host, op.reference(dev_inputs, case.params, model), xp,
                  f"{case.op} {case.describe()} under {model.name}")


def _check_in(xp: Any, op: str, model: PrecisionModel, examples: int,
              shrink: bool = True) -> None:
    """``examples`` drawn cases of ``op`` (derandomized, special values overlaid)."""
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck),
              phases=[p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)])
    @given(case=cases(op=op, storage=model.storage.name, max_elements=800, max_overlays=2))
    def check(case: Case) -> None:
        _agree_in(xp, case, model)

    check()


@pytest.fixture
def no_implicit_host_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's NumPy arrays refuse ``np.asarray`` as CuPy's do (NumPy would otherwise
    copy them to the host element by element): a reference that converts a device
    input to the host fails here as on a GPU."""
    tnp = pytest.importorskip("torch._numpy")

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Implicit conversion to a NumPy array is not allowed (as CuPy's)")

    monkeypatch.setattr(tnp.ndarray, "__array__", refuse, raising=False)
    monkeypatch.setattr(tracked, "SINGLE_SUMS", False)  # torch sums in float64 too


@pytest.mark.parametrize("op", HAND_WRITTEN)
def test_a_hand_written_op_in_torch_on_the_cpu_gives_the_hosts_radii(
        op: str, no_implicit_host_copy: None) -> None:
    """CuPy's check below, in torch's namespace on the CPU: every op computes in its
    operands' namespace, which no GPU is needed to see (one drawn case of its
    targets' first model)."""
    torch_xp = namespace_named("torch")
    with on_device(torch_xp, "cpu"):
        _check_in(torch_xp, op, _models(op)[0], 1, shrink=False)


@pytest.mark.parametrize("op", HAND_WRITTEN)
def test_a_hand_written_op_in_a_strict_namespace_gives_the_hosts_radii(
        op: str, strict: Any) -> None:
    """CuPy's check below with CuPy's refusals on the CPU (no host array beside the
    namespace's, no implicit conversion): one drawn case of its targets' first model."""
    _check_in(strict, op, _models(op)[0], 1, shrink=False)


@pytest.mark.gpu
@pytest.mark.parametrize("op", HAND_WRITTEN)
def test_a_hand_written_op_on_cupy_gives_the_hosts_radii(op: str) -> None:
    cupy = pytest.importorskip("cupy")
    for model in _models(op):
        _check_in(cupy, op, model, 6)
