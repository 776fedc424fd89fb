"""The exact contraction's passes in torch's namespace (numoracle.oracle.fused_torch):
the general path's bits, the host's facts, and no array through the host."""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np
import pytest

from numoracle.oracle import formats, fused_torch, tracked
from numoracle.oracle.formats import BF16, FP16, FP32, TF32
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

MODELS = ("fp32", "tf32", "bf16", "fp64", "fp32-bf16in", "fp16-acc16")
CASES = {
    "linear": {"batch": 5, "in_features": 33, "out_features": 9, "bias": True},
    "matmul": {"m": 4, "k": 40, "n": 3},
    "conv2d": {"batch": 2, "in_channels": 4, "out_channels": 6, "height": 5, "width": 6,
               "kernel_size": 3, "padding": 1, "groups": 2, "bias": True},
}


def _values(shape: tuple[int, ...], family: str, rng: np.random.Generator) -> np.ndarray:
    """float32 values held as float64, with the family's special elements overlaid."""
    v = rng.standard_normal(shape).astype(np.float32).astype(np.float64)
    f = v.reshape(-1)
    f[3::11] = 0.0
    if family == "integers":  # (the exact regime: every partial sum representable)
        v[...] = np.round(v * 8)
    elif family == "subnormal":
        f[5::13] = 2.0**-1070
    elif family == "huge":  # (sums past float32's range: unjudged radii)
        f[5::13] = 3e38
    elif family == "special":  # (the general path decides: the passes hand over)
        f[5::17] = np.inf
        f[6::19] = np.nan
    elif family == "grid":  # (a few elements off float32's grid)
        f[::7] = np.round(f[::7] * 64) / 64 + 2.0**-30
    return v


def _inputs(name: str, family: str, device: Any = "cpu") -> tuple[dict[str, Any], dict]:
    op = get_op(name)
    params = op.validate(CASES[name])
    rng = np.random.default_rng(hash((name, family)) % 2**32)
    return {k: torch.as_tensor(_values(s, family, rng), device=device)
            for k, s in op.input_shapes(params).items()}, params


def _reference(name: str, inputs: dict[str, Any], params: dict, model: str,
               passes: bool) -> dict[str, tracked.Tracked]:
    saved = fused_torch.TORCH_PASSES
    fused_torch.TORCH_PASSES = passes
    try:
        return get_op(name).reference(inputs, params, get_model(model))
    finally:
        fused_torch.TORCH_PASSES = saved


def _references(name: str, family: str, model: str, passes: bool,
                device: Any = "cpu") -> dict[str, tracked.Tracked]:
    inputs, params = _inputs(name, family, device)
    return {k: t.to_host() for k, t in _reference(name, inputs, params, model,
                                                   passes).items()}


def _assert_same_bits(a: dict[str, tracked.Tracked], b: dict[str, tracked.Tracked],
                      where: str) -> None:
    assert set(a) == set(b)
    for k, t in a.items():
        u = b[k]
        for field in ("value", "lo", "det", "prob", "ref_err", "mag"):
            x, y = getattr(t, field), getattr(u, field)
            assert (x is None) == (y is None), (where, k, field)
            if x is not None:
                x, y = (np.broadcast_to(v, t.shape) for v in (x, y))
                assert np.array_equal(x.view(np.int64), y.view(np.int64)), (where, k, field)


@pytest.mark.parametrize("family", ["normal", "integers", "subnormal", "huge", "special",
                                    "grid"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_passes_give_the_general_paths_bits(name: str, family: str) -> None:
    """Every output's value, low part and radii of a reference in torch's namespace are
    the same bits with the passes as on the general path, for every model (the exact
    regime, subnormal inputs, sums past float32's range, non-finite inputs, inputs off
    the compute format, lengths per element in the convolution)."""
    for model in MODELS:
        _assert_same_bits(_references(name, family, model, False),
                          _references(name, family, model, True), f"{name} {family} {model}")


def test_the_passes_are_taken_and_read_the_device_once() -> None:
    """With the passes, a linear backward in torch's namespace reads its operands' facts
    in one transfer (``tolist``) and makes no other read of the device's values; on
    the general path it reads them many times."""
    reads = []
    inputs, params = _inputs("linear", "normal")
    for passes in (True, False):
        with _Spy() as spy:
            _reference("linear", inputs, params, "fp32", passes)
        reads.append(spy.reads)
    assert reads[0] == 1 < reads[1]


@pytest.mark.parametrize("fmt", [FP32, TF32, BF16, FP16])
def test_representable_is_the_formats(fmt: formats.Format) -> None:
    rng = np.random.default_rng(5)
    v = rng.standard_normal(4000) * 2.0 ** rng.integers(-160, 140, 4000)
    v[::3] = formats.quantize(v[::3], fmt)
    v[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-1074, fmt.max, -fmt.tiny]
    got = fused_torch.representable(torch.as_tensor(v), fmt).numpy()
    want = formats.representable(v, fmt)
    assert 0 < want.sum() < want.size
    np.testing.assert_array_equal(got, want)


def test_operand_facts_are_the_hosts() -> None:
    """The lowest set bit and the flags of each operand, as the host finds them."""
    rng = np.random.default_rng(6)
    ops = [rng.standard_normal((7, 9)) * 2.0**-3, np.round(rng.standard_normal(50) * 64),
           np.array([1.5, 0.0, 2.0**-1070, 3.0]), np.zeros(0), np.zeros(4),
           np.array([np.inf, 2.0**-20, np.nan]), rng.standard_normal(30).astype(np.float32)
           .astype(np.float64) * 2.0**-140]
    none = 1 << 20
    got = fused_torch.operand_facts([torch.as_tensor(a) for a in ops], FP32, none)
    for a, (mag, low, flags, deep) in zip(ops, got, strict=True):
        np.testing.assert_array_equal(mag.numpy(), np.abs(a))
        finite = a[np.isfinite(a)]
        lsb = tracked.lsb_exponent(finite if finite.size else np.zeros(0))
        assert fused_torch.lowest_exponent(low, none) == lsb
        assert deep == (lsb < fused_torch.DEEP_EXPONENT)
        counted = finite[finite != 0]
        want = ((formats.NOT_FINITE if not np.isfinite(a).all() else 0)
                | (formats.SUBNORMAL if (np.abs(counted) < FP32.tiny).any() else 0)
                | (formats.UNREPRESENTABLE if not formats.representable(counted, FP32).all()
                   else 0))
        assert flags == want, a


class _Spy(TorchFunctionMode):
    """Records, during a computation on tensors, every tensor made on torch's default
    device instead of an operand's (more than one element: a device would refuse it
    beside its own), every tensor moved to a named device or to the host, every host
    array made a tensor, and every read of a device's values."""

    FACTORIES = {torch.ones, torch.zeros, torch.empty, torch.full, torch.arange,
                 torch.tensor, torch.as_tensor, torch.linspace}
    READS = {"tolist", "item", "__bool__", "__float__", "__int__"}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, tuple[int, ...], str]] = []
        self.reads = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        first = args[0] if args else None
        big = isinstance(first, torch.Tensor) and first.numel() > 1
        if func in self.FACTORIES and "device" not in kwargs and isinstance(
                out, torch.Tensor) and out.numel() > 1:
            self._note("made on the default device", name, out)
        if name in ("numpy", "cpu") and big:
            self._note("to the host", name, first)
        if name == "to" and big and ("device" in kwargs or any(
                isinstance(a, (torch.device, str)) for a in args[1:])):
            self._note("moved", name, first)
        if func in (torch.as_tensor, torch.tensor, torch.from_numpy) and isinstance(
                first, np.ndarray) and first.size > 1:
            self._note("from the host", name, out)
        if name in self.READS:
            self.reads += 1
        return out

    def _note(self, what: str, name: str, t: Any) -> None:
        where = [f"{f.filename.rsplit('numoracle/', 1)[-1]}:{f.lineno}"
                 for f in traceback.extract_stack() if "/numoracle/" in f.filename]
        self.found.append((what, name, tuple(t.shape), " <- ".join(where[-3:])))


@pytest.mark.parametrize("model", ["fp32", "tf32", "bf16", "fp16-acc16"])
def test_a_reference_on_tensors_moves_no_array_through_the_host(model: str,
                                                               device: str = "cpu") -> None:
    """The linear backward's reference on tensors makes its arrays where its operands
    are and brings none to the host (on a CUDA device an array made on the host beside
    the device's is refused, one moved costs a copy), on both paths."""
    inputs, params = _inputs("linear", "normal", device)
    for passes in (True, False):
        _reference("linear", inputs, params, model, passes)  # (first calls: caches filled)
        with _Spy() as spy:
            _reference("linear", inputs, params, model, passes)
        assert not spy.found, spy.found


def _refuse_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on an array of torch's namespace handed to NumPy (``np.asarray``,
    ``to_numpy``) raises."""
    from numoracle.oracle.xp import _torch_namespace

    def refuse(a: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"an array of torch's namespace handed to NumPy ({a!r:.60})")
    ns = _torch_namespace()
    monkeypatch.setattr(ns.ndarray, "__array__", refuse, raising=False)
    monkeypatch.setattr(type(ns), "asnumpy", lambda self, a: refuse(a))


@pytest.mark.parametrize("family", ["normal", "special"])
@pytest.mark.parametrize("model", ["fp32", "bf16"])
def test_conv2ds_general_path_makes_its_arrays_where_its_operands_are(
        model: str, family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """conv2d's general path in torch's namespace (the passes off; ``special``: the
    structural zeros that meet infinite weights): no tensor brought to the host or
    made on torch's default device, nothing handed to NumPy (on a CUDA device each is
    a copy back or a refusal); what it takes from the host are constants of the
    shapes (the padding's and the dilation's structure, the per-element lengths)."""
    inputs, params = _inputs("conv2d", family)
    _reference("conv2d", inputs, params, model, False)  # (first calls: caches filled)
    _refuse_numpy(monkeypatch)
    with _Spy() as spy:
        _reference("conv2d", inputs, params, model, False)
    assert not [f for f in spy.found if f[0] != "from the host"], spy.found


def test_an_array_handed_to_numpy_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: NumPy handed an array of torch's namespace, either way."""
    from numoracle.oracle.xp import _torch_namespace, to_numpy

    a = _torch_namespace().asarray(torch.ones(3, 4))
    _refuse_numpy(monkeypatch)
    for convert in (np.asarray, to_numpy):
        with pytest.raises(AssertionError, match="handed to NumPy"):
            convert(a)


def test_the_exact_products_make_their_arrays_where_the_operands_are() -> None:
    """The escalation's exact products (``exact_dot.exact_matmul``) on torch's arrays
    make their sums on the operands' device, the bias taken there: none on torch's
    default device (on a GPU a CPU array beside the operands' is refused)."""
    from numoracle.oracle import exact_dot
    from numoracle.oracle.xp import _torch_namespace, as_namespace

    torch_xp = _torch_namespace()
    rng = np.random.default_rng(3)
    host = [rng.standard_normal(s) for s in ((4, 7), (7, 3), (4, 3))]
    operands = [as_namespace(h, torch_xp, "cpu") for h in host]
    with _Spy() as spy:
        got = exact_dot.exact_matmul(*operands)
    assert not spy.found, spy.found
    for g, w in zip(got, exact_dot.exact_matmul(*host), strict=True):  # NumPy's bits
        assert np.array_equal(g.tensor.numpy(), w)


def test_the_spy_finds_an_array_made_on_the_host() -> None:
    """The check above can fail: an array made on the default device, one brought to
    the host and one moved are each found."""
    x = torch.ones(3, device="cpu")
    with _Spy() as spy:
        torch.ones(4)
        x.numpy()
        x.to("cpu")
    assert [f[0] for f in spy.found] == ["made on the default device", "to the host", "moved"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_passes_give_the_general_paths_bits_on_a_device(name: str) -> None:
    """On a CUDA device, torch's namespace: the passes' bits are the general path's."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    for family in ("normal", "integers", "huge", "special"):
        for model in MODELS:
            _assert_same_bits(_references(name, family, model, False, "cuda"),
                              _references(name, family, model, True, "cuda"),
                              f"{name} {family} {model}")


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["fp32", "tf32", "bf16"])
def test_a_reference_on_cuda_tensors_moves_no_array_through_the_host(model: str) -> None:
    """The same on a CUDA device."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    test_a_reference_on_tensors_moves_no_array_through_the_host(model, "cuda")
