"""Recorded evaluations (:mod:`numoracle.oracle.traced.recording`): a replay whose guards
hold gives the evaluation's values and radii bit for bit on a new case; a case that takes
another branch is refused and evaluated afresh; integer inputs are part of the signature;
a compiled replay raises its radii by :data:`COMPILED_SLACK`. On the CPU, in torch's
namespace (the GPU's replays compiled are measured in ``benchmarks/traced/recorded.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from replay_checks import assert_bounds_what_it_bounds, host

from numoracle.errors import InvalidArgument
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced.capture import capture
from numoracle.oracle.traced.interpret import evaluate
from numoracle.oracle.traced.op import TracedOp
from numoracle.oracle.traced.recording import (
    COMPILED_SLACK,
    MODE_VARIABLE,
    Recordings,
    mode,
    record,
    signature,
)
from numoracle.oracle.traced.library._common import unsure_of
from numoracle.oracle.traced.rules import lookup
from numoracle.oracle.tracked import bounded, exact
from numoracle.oracle.xp import (
    GPU_NAMESPACE_VARIABLE,
    array_module,
    as_namespace,
    namespace_named,
    to_numpy,
)

FIELDS = ("value", "ref_err", "det", "prob", "mag")


def _softmax_op() -> TracedOp:
    return TracedOp(lambda x: torch.softmax(x, dim=-1), inputs={"x": torch.zeros(6, 32,
                    dtype=torch.float64)}, grads=("x",), name="recording_softmax_test")


def _case(seed: int) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return {k: torch.from_numpy(rng.standard_normal((6, 32)).astype(np.float32)
                                .astype(np.float64)) for k in ("x", "grad_out")}


def _setup() -> tuple[Any, Any, Any]:
    op = _softmax_op()
    tx = namespace_named("torch")
    ctx = replace(op.context(get_model("fp32")), xp=tx, device=torch.device("cpu"))
    first = _case(1)
    graph = capture(op.ref, {"x": first["x"]}, {"grad_out": first["grad_out"]})
    return graph, ctx, tx


def _assert_bits(a: dict[str, Any], b: dict[str, Any], scale: float = 1.0) -> None:
    assert set(a) == set(b)
    for k in a:
        for f in FIELDS:
            want = host(b[k], f) * (scale if f in ("ref_err", "det", "prob") else 1.0)
            got = host(a[k], f)
            assert np.array_equal(got, want, equal_nan=True), (k, f)


def test_a_replay_gives_the_evaluations_bits_on_a_new_case() -> None:
    graph, ctx, tx = _setup()
    rec = record(lambda fl: evaluate(graph, fl, ctx), _case(1), tx)
    assert rec.nodes > 100 and rec.sources  # (decisions were guarded)
    new = _case(2)
    got = rec.run(new)
    assert got is not None, rec.failed_sources
    _assert_bits(got, evaluate(graph, dict(new), ctx))
    assert rec.replays == 1 and rec.refused == 0


def test_a_case_that_decides_otherwise_is_refused() -> None:
    graph, ctx, tx = _setup()
    rec = record(lambda fl: evaluate(graph, fl, ctx), _case(1), tx)
    odd = _case(2)
    odd["x"][0, 3] = float("inf")  # (a row with +inf: other branches of the rules)
    assert rec.run(odd) is None  # (a guard failed, or a shape the recorded case decided)
    assert rec.refused == 1 and rec.replays == 0


def test_a_compiled_replay_raises_its_radii_by_the_slack() -> None:
    graph, ctx, tx = _setup()
    rec = record(lambda fl: evaluate(graph, fl, ctx), _case(1), tx)
    plain = rec.run(_case(3))
    rec.compiled = rec.module  # (the graph itself stands for a compiled one)
    raised = rec.run(_case(3))
    assert plain is not None and raised is not None
    _assert_bits(raised, plain, scale=1.0 + COMPILED_SLACK)


def test_recordings_evaluate_the_first_case_and_replay_from_the_second() -> None:
    graph, ctx, tx = _setup()
    book = Recordings()
    calls = []

    def run(fl: dict[str, Any]) -> Any:
        calls.append(1)
        return evaluate(graph, fl, ctx)

    assert book.evaluate("k", run, _case(1), tx, "replay") is None  # (seen once)
    second = book.evaluate("k", run, _case(2), tx, "replay")
    assert second is not None and "k" in book.kept
    n = len(calls)
    third = book.evaluate("k", run, _case(3), tx, "replay")
    assert third is not None and len(calls) == n  # (replayed: not evaluated again)
    _assert_bits(third, evaluate(graph, dict(_case(3)), ctx))


def test_integer_inputs_are_part_of_the_signature() -> None:
    x = torch.zeros(4, 5, dtype=torch.float64)
    a = signature(1, {"x": x, "labels": np.array([0, 1, 2, 3])}, "m")
    assert a == signature(1, {"x": x, "labels": np.array([0, 1, 2, 3])}, "m")
    assert a != signature(1, {"x": x, "labels": np.array([0, 1, 2, 4])}, "m")
    assert a != signature(1, {"x": torch.zeros(4, 6, dtype=torch.float64),
                              "labels": np.array([0, 1, 2, 3])}, "m")


def test_the_mode_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODE_VARIABLE, "sometimes")
    with pytest.raises(InvalidArgument, match="NUMORACLE_RECORD"):
        mode()
    monkeypatch.setenv(MODE_VARIABLE, "compile")
    assert mode() == "compile"


def test_a_traced_op_replays_host_cases_and_hands_back_host_arrays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    op = _softmax_op()
    model = get_model("fp32")
    graph, ctx, _ = _setup()
    monkeypatch.setenv(MODE_VARIABLE, "replay")
    for seed in (1, 2, 3):
        case = {k: v.numpy() for k, v in _case(seed).items()}
        got = op.reference(case, {}, model)
        assert all(isinstance(t.value, np.ndarray) for t in got.values())
        if seed > 1:  # (by the recording: the torch namespace's evaluation, bit for bit)
            _assert_bits(got, evaluate(graph, dict(_case(seed)), ctx))
    (rec,) = op.recordings.kept.values()
    assert rec.replays == 2


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["compile", "graphs"])
def test_a_compiled_replay_on_a_gpu_bounds_what_the_evaluation_bounds(
        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA device, a compiled replay of a new case: its values within the
    evaluation's own error of the evaluation's (in torch's namespace, as recorded), its
    radii at least the evaluation's."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv(GPU_NAMESPACE_VARIABLE, "torch")
    op = _softmax_op()
    model = get_model("fp32")
    cases = [{k: v.cuda() for k, v in _case(seed).items()} for seed in (1, 2, 3)]
    monkeypatch.setenv(MODE_VARIABLE, "off")
    truth = op.reference(cases[2], {}, model)
    monkeypatch.setenv(MODE_VARIABLE, how)
    for case in cases:
        got = op.reference(case, {}, model)
    (rec,) = op.recordings.kept.values()
    assert rec.compiled is not None and rec.replays >= 1, rec.failed_sources
    assert_bounds_what_it_bounds(truth, got)


def test_a_shape_decided_by_the_values_is_guarded() -> None:
    """A selection by a mask (its count of true elements makes a shape) replays for a
    case with the same count elsewhere, and refuses one with another count."""
    tx = namespace_named("torch")

    def evaluate_(fl: dict[str, Any]) -> dict[str, Any]:
        x = tx.asarray(fl["x"])
        picked = x[x > 0]
        return {"out": exact(tx.ones(x.shape) * tx.sum(picked * picked))}

    rec = record(evaluate_, {"x": torch.tensor([1.0, -2.0, 3.0, -4.0, 5.0])}, tx)
    same_count = rec.run({"x": torch.tensor([-1.0, 2.0, 3.0, 4.0, -5.0])})
    assert same_count is not None
    assert np.all(host(same_count["out"], "value") == 29.0)
    assert rec.run({"x": torch.tensor([1.0, 2.0, 3.0, 4.0, -5.0])}) is None


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_torchs_namespace_pads_as_numpy(mode: str) -> None:
    tx = namespace_named("torch")
    host = np.arange(12.0).reshape(3, 4)
    got = tx.pad(tx.asarray(torch.from_numpy(host)), ((1, 0), (2, 1)), mode=mode)
    np.testing.assert_array_equal(to_numpy(got), np.pad(host, ((1, 0), (2, 1)), mode=mode))


def _table_reference(name: str, seeds: tuple[int, ...]) -> tuple[Any, Any, list[dict[str, Any]]]:
    """The cost table's reference ``name`` at its small size with its gradients: its
    graph, torch's namespace on the CPU, and one case per seed (cotangents drawn too)."""
    from benchmarks.traced.table import REFERENCES, _inputs  # noqa: PLC0415

    fn, grads = REFERENCES[name]
    draws = [_inputs(name, "small", np.random.default_rng(s)) for s in seeds]
    op = TracedOp(fn, inputs={k: torch.from_numpy(v) for k, v in draws[0].items()},
                  grads=grads, name=f"recording_{name}_test")
    for seed, host in zip(seeds, draws, strict=True):
        rng = np.random.default_rng(seed + 100)
        for k, s in op.input_shapes({}).items():
            host.setdefault(k, rng.standard_normal(s).astype(np.float32).astype(np.float64))
    cases = [{k: torch.from_numpy(v) for k, v in h.items()} for h in draws]
    graph = capture(op.ref, {n: cases[0][n] for n in op.ref.names},
                    {f"grad_{o}": cases[0][f"grad_{o}"] for o in op._graded({})})
    ctx = replace(op.context(get_model("fp32")), xp=namespace_named("torch"),
                  device=torch.device("cpu"))
    return graph, ctx, cases


def test_a_recording_through_a_comparison_replays_a_new_case() -> None:
    """ReLU's backward compares its output with 0 and picks by the mask (``le``, then
    ``where``): the mask stays on the device, so no guard holds its elements, and the
    conv + batch norm + ReLU forward and backward replays a new case with the
    evaluation's bits."""
    graph, ctx, cases = _table_reference("conv_bn_relu", (1, 2))
    assert {"le", "where"} <= {getattr(n.target, "__name__", "").split(".")[0]
                               for n in graph.module.graph.nodes}
    rec = record(lambda fl: evaluate(graph, fl, ctx), cases[0], ctx.xp)
    assert not [s for s in rec.sources if "elementwise.py" in s], rec.sources
    got = rec.run(cases[1])
    assert got is not None, rec.failed_sources
    _assert_bits(got, evaluate(graph, dict(cases[1]), ctx))


def test_a_mask_in_torchs_namespace_stays_there_with_its_unsure_elements() -> None:
    """A comparison of values within their radii of each other: in torch's namespace its
    mask and unsure elements are arrays of that namespace (nothing read back), the same
    elements as NumPy's; ``where`` over it gives NumPy's bits."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(64)
    y = x + np.where(np.arange(64) % 2 == 0, 1e-9, 1.0)  # (even elements within radii)
    r = np.full(64, 1e-6)
    model = get_model("fp32")
    tx = namespace_named("torch")
    results = {}
    for name, xp in (("numpy", np), ("torch", tx)):
        ctx = replace(_softmax_op().context(model), xp=xp,
                      device=torch.device("cpu") if xp is tx else None)
        a, b = (bounded(as_namespace(v, xp), as_namespace(r, xp)) for v in (x, y))
        mask = lookup(torch.ops.aten.gt.Tensor)(ctx, a, b)
        assert array_module(mask) is xp and array_module(unsure_of(mask)) is xp
        results[name] = (mask, lookup(torch.ops.aten.where.self)(ctx, mask, a, b))
    (m_np, w_np), (m_t, w_t) = results["numpy"], results["torch"]
    assert np.array_equal(to_numpy(m_t), m_np)
    assert np.array_equal(to_numpy(unsure_of(m_t)), unsure_of(m_np))
    assert unsure_of(m_np)[::2].all() and not unsure_of(m_np)[1::2].any()
    _assert_bits({"w": w_t}, {"w": w_np})


def test_the_graph_count_attributes_every_operation_to_the_code_that_made_it() -> None:
    """benchmarks.traced.graph_ops: a recorded graph's operations, each grouped by its
    rule and by the arithmetic that made it (a stack frame of the package kept per node)."""
    from benchmarks.traced.graph_ops import count  # noqa: PLC0415 - the benchmark's harness

    row = count("softmax", "small", backward=False)
    assert row["ops"] > 100 and row["guards"] > 0
    assert sum(row["by_rule"].values()) == sum(row["by_arithmetic"].values()) == row["ops"]
    assert "(none)" not in row["by_arithmetic"]  # (every node made by the package's code)
    assert any(k.startswith("softmax.py:") for k in row["by_rule"])
