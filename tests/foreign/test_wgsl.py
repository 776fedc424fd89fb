"""WGSL targets on whatever adapter wgpu finds (Mesa's lavapipe in CI): the
examples' correct shaders pass, their mutants are caught and shrunk, a repro
embeds the shader and replays; a spec that does not fit is refused before any
case. Skips cleanly where wgpu or a Vulkan adapter is missing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from numoracle.errors import InvalidArgument
from numoracle.foreign import from_spec, run, wgsl_target
from numoracle.foreign.wgsl import wgsl_unavailable
from numoracle.running.draws import default_strategy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "wgsl"
_REASON = wgsl_unavailable()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=str(_REASON))


def _examples() -> Any:
    spec = importlib.util.spec_from_file_location("check_wgsl", EXAMPLES / "check_wgsl.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CW = _examples() if _REASON is None else None
#: small cases keep the suite fast; shrinking works the same
SMALL = 1024


def _run(t: Any, n: int, store: Path | None = None, **params: Any) -> Any:
    return run(t, examples=n, store=store,
               strategy=default_strategy(t, max_elements=SMALL, params=params or None))


def test_correct_matmul_passes(tmp_path: Path) -> None:
    res = _run(CW.target("matmul", spec_dir=tmp_path), 12)
    assert res.verdict == "pass", res.message
    assert res.cases == 12


def test_correct_kan_passes_every_order(tmp_path: Path) -> None:
    for order in (1, 2, 5):
        res = _run(CW.target("kan", order=order, spec_dir=tmp_path), 3, spline_order=order)
        assert res.verdict == "pass", res.message


@pytest.mark.parametrize(("mutant", "wrong"), [
    ("first_layer_input_grad_zero", "grad_input"),
    pytest.param("order2_derivative", "grad_input", marks=pytest.mark.slow),
    ("k_tail_dropped", "out"),
    ("dispatch_floor", "out"),
])
def test_mutants_are_caught_and_shrunk(tmp_path: Path, shapes_of: Any, mutant: str,
                                       wrong: str) -> None:
    example = CW.MUTANTS[mutant][0]
    t = CW.target(example, mutant, spec_dir=tmp_path)
    params = {"spline_order": 2} if mutant == "order2_derivative" else {}
    res = _run(t, 20, tmp_path / "repros", **params)
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith(f"{wrong}: ")
    shapes = shapes_of(res.repro_shape)
    if example == "matmul":  # one element of a one-term product: the tail of a tile
        assert shapes["a"][-1] < 16 and shapes["b"][-1] < 16
    else:  # one sample, one feature in and out
        assert shapes["x"] == (1, 1) and shapes["grad_output"] == (1, 1)


def test_repro_embeds_the_shader_and_replays(tmp_path: Path) -> None:
    t = CW.target("matmul", "k_tail_dropped", spec_dir=tmp_path)
    res = _run(t, 10, tmp_path / "repros")
    assert res.verdict == "FAIL" and res.repro is not None
    spec_file = Path(t.source or "")
    text = spec_file.read_text()
    spec = json.loads(text.split('r"""', 1)[1].split('"""', 1)[0])
    assert spec["kind"] == "wgsl" and "let tiles = dims.k / TILE;" in spec["shader"]
    again = from_spec(spec, source=str(spec_file))
    assert _run(again, 10).verdict == "FAIL"


@pytest.mark.slow
def test_a_traced_reference_judged_through_a_shader(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    inputs = {"a": ("batch", "m", "k"), "b": ("batch", "k", "n")}
    shader = CW.shader_text("matmul")
    good = wgsl_target(shader, reference=torch.matmul, inputs=inputs, op="traced_matmul_wgsl",
                       bindings=["a", "b", "out", ["batch", "m", "k", "n"]],
                       dispatch=("ceil(n / 16)", "ceil(m / 16)", "batch"), spec_dir=tmp_path)
    assert run(good, examples=4, store=None).verdict == "pass"


def _matmul(**kw: Any) -> Any:
    args = {"op": "matmul", "bindings": CW.MATMUL_BINDINGS, "dispatch": CW.MATMUL_DISPATCH}
    args.update(kw)
    return wgsl_target(CW.shader_text("matmul"), **args)


@pytest.mark.parametrize(("kw", "message"), [
    ({"bindings": ["a", "b", "out", ["m", "k", "n"]]}, "leave out ['batch_shape']"),
    ({"bindings": ["a", "b", "out", "m"]}, "is not an array of matmul"),
    ({"bindings": ["a", "b", "out", ["prod(batch_shape)", "m", "k", "n:int64"]]},
     "32-bit scalars"),
    ({"bindings": ["a", "out", "b", ["prod(batch_shape)", "m", "k", "n"]]},
     "does not declare its bindings"),
    ({"dispatch": ("ceil(n / 16)", "open('x')")}, "is not allowed"),
    ({"dispatch": ("ceil(q / 16)",)}, "'q' is not a parameter of the op"),
    ({"entry_point": "nope"}, "does not compile"),
    ({"precision": "bf16"}, "exchange f32 arrays"),
])
def test_specs_that_do_not_fit_are_refused(tmp_path: Path, kw: dict[str, Any],
                                           message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[").replace("(", r"\(")):
        _matmul(spec_dir=tmp_path, **kw)
