"""check_kernel and validate: pass a correct kernel, catch a broken one with a
message that ends in the replay command, refuse bad arguments; the pytest
plugin's profiles, GPU pinning, fixture and run summary."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import numoracle
from numoracle import InvalidArgument, KernelMismatch, NumoracleError, check_kernel, validate
from numoracle.api import add_listener, op_outputs, remove_listener
from numoracle.pytest_plugin import RunSummary, choose_profile, pin_worker_gpu

pytest_plugins = ["pytester"]

EXAMPLES = 8
#: finite value families only, for the tests of the API's wiring beyond the first;
#: the oracle's handling of Inf and NaN is tested with the oracle and the targets
FINITE: dict[str, Any] = {"families": ("normal", "uniform", "exact"), "max_overlays": 0}


def good_linear(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A correct float32 linear layer and its gradients."""
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + bias
        out["grad_bias"] = grad_output.sum(axis=0)
    out["y"] = y
    return out


def bias_twice_linear(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """The bias is added twice."""
    out = good_linear(x, weight, grad_output, bias)
    if bias is not None:
        out["y"] = out["y"] + bias
    return out


def good_matmul(a: Any, b: Any) -> dict[str, Any]:
    return {"out": np.matmul(a, b)}


# -- check_kernel ----------------------------------------------------------------------


def test_check_kernel_passes_a_correct_kernel(tmp_path: Path) -> None:
    res = check_kernel(good_linear, op="linear", precision="fp32", examples=30,
                       store=tmp_path)
    assert res.verdict == "pass"
    assert res.cases == 30 and res.failures == 0
    assert 0 <= res.worst_ratio < 1
    assert res.target == "good_linear" and res.op == "linear" and res.precision == "fp32"
    assert not list(tmp_path.iterdir()), "a passing check saves no repro"


def test_check_kernel_catches_bias_added_twice(tmp_path: Path) -> None:
    with pytest.raises(KernelMismatch) as info:
        check_kernel(bias_twice_linear, op="linear", examples=50, store=tmp_path)
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert message.startswith("FAIL: bias_twice_linear on linear, claiming fp32")
    assert "y (" in message and "diagnosis:" in message
    repro = message.splitlines()[-1].removeprefix("  replay: numoracle replay ")
    assert message.splitlines()[-1].startswith("  replay: numoracle replay ")
    assert (Path(repro) / "repro.json").is_file()
    assert Path(repro).parent == tmp_path


def test_check_kernel_judges_the_edges_of_the_sizes_first() -> None:
    """As a run's rows do, check_kernel starts with a case at the top of every size
    range and one at a partial tile (``edge_cases``), before any drawn case."""
    from numoracle.api import _make_target  # noqa: PLC0415 - the target check_kernel makes
    from numoracle.running.draws import edge_cases  # noqa: PLC0415

    shapes: list[tuple[tuple[int, ...], ...]] = []

    def mm(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
        shapes.append((a.shape, b.shape))
        return {"out": np.matmul(a, b)}

    check_kernel(mm, op="matmul", examples=8, seed=3, store=None)
    edges = edge_cases(_make_target(mm, op="matmul", precision="fp32", backend="numpy",
                                    outputs=(), layouts=("C",), name=None), 3)
    want = [(c.inputs()["a"].shape, c.inputs()["b"].shape) for c in edges]
    assert len(want) == 4 and len(set(want)) == 4 and shapes[:len(want)] == want


def test_check_kernel_store_none_saves_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KernelMismatch) as info:
        check_kernel(bias_twice_linear, op="linear", examples=50, store=None)
    assert "numoracle replay" not in str(info.value)
    assert not list(tmp_path.iterdir())


def test_check_kernel_names_and_strategy_overrides(tmp_path: Path) -> None:
    res = check_kernel(good_matmul, op="matmul", name="my-mm", examples=EXAMPLES,
                       families=("exact",), max_overlays=0, max_elements=64, store=tmp_path)
    assert res.target == "my-mm" and res.worst_ratio == 0.0  # exact regime: bit-exact


def test_check_kernel_examples_none_follows_the_profile(tmp_path: Path) -> None:
    from hypothesis import settings

    res = check_kernel(good_matmul, op="matmul", examples=None, max_elements=64,
                       store=tmp_path, **FINITE)
    assert res.cases == settings().max_examples


def test_check_kernel_unavailable_backend_is_an_error() -> None:
    from numoracle.targets import get_backend

    reason = get_backend("cupy").available()
    if reason is None:
        pytest.skip("cupy is usable here")
    with pytest.raises(NumoracleError, match="cannot run here") as info:
        check_kernel(good_matmul, op="matmul", backend="cupy", examples=EXAMPLES)
    assert not isinstance(info.value, KernelMismatch)


def test_listeners_see_every_result(tmp_path: Path) -> None:
    seen: list[Any] = []
    add_listener(seen.append)
    try:
        check_kernel(good_matmul, op="matmul", examples=3, store=tmp_path, **FINITE)
        with pytest.raises(KernelMismatch):
            check_kernel(bias_twice_linear, op="linear", examples=50, store=tmp_path)
    finally:
        remove_listener(seen.append)
    assert [(r.target, r.verdict) for r in seen] == [("good_matmul", "pass"),
                                                     ("bias_twice_linear", "FAIL")]
    check_kernel(good_matmul, op="matmul", examples=1, store=tmp_path, **FINITE)
    assert len(seen) == 2


def test_op_outputs() -> None:
    assert op_outputs("linear") == ("y", "grad_input", "grad_weight", "grad_bias")
    assert op_outputs("matmul") == ("out",)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"op": "conv9d"}, "op 'conv9d' is unknown"),
        ({"op": "linear", "precision": "fp8"}, "precision model 'fp8' is unknown"),
        ({"op": "linear", "backend": "jax"}, "backend 'jax' is unknown"),
        ({"op": "linear", "backend": 3}, "must be a backend name"),
        ({"op": "linear", "outputs": "y"}, "not a string"),
        ({"op": "linear", "outputs": ("z",)}, r"names \['z'\], which linear does not compute"),
        ({"op": "linear", "layouts": ("Z",)}, "layouts=.* must be a non-empty subset"),
        ({"op": "linear", "layouts": ()}, "must be a non-empty subset"),
        ({"op": "linear", "examples": 0}, "examples=0 must be a positive int"),
        ({"op": "linear", "examples": True}, "must be a positive int"),
        ({"op": "linear", "seed": "zero"}, "seed='zero' must be an int"),
        ({"op": "linear", "name": ""}, "must be a non-empty str"),
        ({"op": "linear", "families": ("nope",)}, "families="),
        ({"op": "linear", "max_elements": 0}, "max_elements=0"),
        ({"op": "linear", "storage": "fp16"}, "use precision= instead"),
        ({"op": "linear", "colour": "red"}, "colour='red' is not an argument"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        check_kernel(good_linear, **kwargs)
    with pytest.raises(InvalidArgument, match=match):
        validate(**kwargs)(good_linear)


# -- validate ---------------------------------------------------------------------------


def test_validate_makes_a_zero_argument_test(tmp_path: Path) -> None:
    test = validate(op="linear", examples=EXAMPLES, store=tmp_path, **FINITE)(good_linear)
    assert test.__name__ == "test_good_linear"
    assert test.kernel is good_linear and test.target.op == "linear"
    assert test() is None
    assert good_linear(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32),
                       np.ones((1, 1), np.float32))["y"].shape == (1, 1)


def test_validate_test_fails_for_a_broken_kernel(tmp_path: Path) -> None:
    test = validate(op="linear", examples=50, store=tmp_path)(bias_twice_linear)
    with pytest.raises(KernelMismatch, match="numoracle replay"):
        test()


def test_validate_keeps_test_names() -> None:
    def test_mine(a: Any, b: Any) -> dict[str, Any]:
        return good_matmul(a, b)

    assert validate(op="matmul")(test_mine).__name__ == "test_mine"


def test_validate_gpu_backends_are_marked_and_skip() -> None:
    from numoracle.targets import get_backend

    test = validate(op="matmul", backend="cupy")(good_matmul)
    assert [m.name for m in test.pytestmark] == ["gpu"]
    if get_backend("cupy").available() is not None:
        with pytest.raises(pytest.skip.Exception, match="cupy"):
            test()
    assert not hasattr(validate(op="matmul")(good_matmul), "pytestmark")


def test_public_names() -> None:
    assert numoracle.__version__ == "0.1.0"
    for name in numoracle.__all__:
        assert hasattr(numoracle, name), name
    assert issubclass(KernelMismatch, AssertionError)


# -- the pytest plugin -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "env", "expected"),
    [
        ("thorough", {"NUMORACLE_PROFILE": "dev"}, None),  # Hypothesis loads the option
        (None, {"NUMORACLE_PROFILE": "thorough", "CI": "1"}, "thorough"),
        (None, {"CI": "true"}, "ci"),
        (None, {}, "dev"),
    ],
)
def test_choose_profile(option: str | None, env: dict[str, str], expected: str | None) -> None:
    assert choose_profile(option, env) == expected


def test_choose_profile_refuses_unknown_names() -> None:
    with pytest.raises(pytest.UsageError, match="NUMORACLE_PROFILE='nope'"):
        choose_profile(None, {"NUMORACLE_PROFILE": "nope"})


@pytest.mark.parametrize(
    ("env", "gpus", "expected"),
    [
        ({"PYTEST_XDIST_WORKER": "gw5"}, 4, "1"),
        ({"PYTEST_XDIST_WORKER": "gw0"}, 2, "0"),
        ({"PYTEST_XDIST_WORKER": "gw3"}, 1, None),  # one GPU: nothing to spread
        ({"PYTEST_XDIST_WORKER": "gw3", "CUDA_VISIBLE_DEVICES": "2"}, 4, None),  # the user's
        ({}, 4, None),  # not an xdist worker
    ],
)
def test_pin_worker_gpu(env: dict[str, str], gpus: int, expected: str | None) -> None:
    before = env.get("CUDA_VISIBLE_DEVICES")
    assert pin_worker_gpu(env, count=lambda: gpus) == expected
    assert env.get("CUDA_VISIBLE_DEVICES") == (expected or before)


def test_run_summary_merges_and_lines() -> None:
    s = RunSummary()
    s.merge([{"target": "k", "op": "linear", "checks": 1, "cases": 10, "failures": 0,
              "worst_ratio": 0.5}])
    s.merge([{"target": "k", "op": "linear", "checks": 2, "cases": 5, "failures": 1,
              "worst_ratio": float("inf")}])
    assert s.rows[("k", "linear")]["checks"] == 3
    lines = s.lines()
    assert lines[0].split() == ["target", "op", "checks", "cases", "failures", "worst", "ratio"]
    assert lines[1].split() == ["k", "linear", "3", "15", "1", "inf"]


INNER_TESTS = textwrap.dedent(
    """
    import numoracle
    import pytest
    from hypothesis import settings

    def good_mm(a, b):
        return {"out": a @ b}

    def bad_mm(a, b):
        return {"out": a @ b + 1}

    test_good = numoracle.validate(op="matmul", examples=3, store=None, max_overlays=0,
                                   families=("normal", "exact"))(good_mm)

    def test_fixture(numoracle_check):
        with pytest.raises(numoracle.KernelMismatch):
            numoracle_check(bad_mm, op="matmul", name="bad_mm", examples=20, store=None)

    def test_profile():
        assert settings().max_examples == 50  # dev: neither CI nor NUMORACLE_PROFILE

    @pytest.mark.gpu
    def test_needs_gpu():
        pass
    """
)


def _inner_env(monkeypatch: Any) -> None:
    for var in ("CI", "NUMORACLE_PROFILE", "PYTEST_XDIST_WORKER"):
        monkeypatch.delenv(var, raising=False)
    # load the plugin by its module name, whether or not the entry point is installed
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:numoracle -p numoracle.pytest_plugin")


def test_plugin_in_a_pytest_run(pytester: pytest.Pytester, monkeypatch: Any) -> None:
    _inner_env(monkeypatch)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    gpu = _has_gpu()
    result.assert_outcomes(passed=4 if gpu else 3, skipped=0 if gpu else 1)
    result.stdout.fnmatch_lines([
        "*numoracle checks*",
        "target*op*checks*cases*failures*worst ratio",
        "bad_mm*matmul*1*1*inf",
        "good_mm*matmul*1*3*0*",
    ])


def test_plugin_summary_under_xdist(pytester: pytest.Pytester, monkeypatch: Any) -> None:
    pytest.importorskip("xdist")
    _inner_env(monkeypatch)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*numoracle checks*", "bad_mm*matmul*1*1*inf",
                                 "good_mm*matmul*1*3*0*"])


def test_plugin_profile_from_the_environment(pytester: pytest.Pytester,
                                             monkeypatch: Any) -> None:
    _inner_env(monkeypatch)
    monkeypatch.setenv("NUMORACLE_PROFILE", "thorough")
    pytester.makepyfile(test_inner="""
        from hypothesis import settings

        def test_profile():
            assert settings().max_examples == 2000
        """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           "--hypothesis-profile=ci")
    result.assert_outcomes(failed=1)


def _has_gpu() -> bool:
    from numoracle.pytest_plugin import _gpu_unavailable_reason

    return _gpu_unavailable_reason() is None


def test_a_failing_validate_test_shows_the_failure_not_numoracle(
        pytester: pytest.Pytester, monkeypatch: Any) -> None:
    _inner_env(monkeypatch)
    pytester.makepyfile(test_bad="""
        import numoracle

        def bad_mm(a, b):
            return {"out": a @ b + 1}

        test_bad = numoracle.validate(op="matmul", examples=10, store=None)(bad_mm)
        """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "KernelMismatch: FAIL: bad_mm on matmul" in out
    for source in ("unavailable_reason()", "_replay_stored(", "raise KernelMismatch"):
        assert source not in out, source  # numoracle's own lines stay hidden
