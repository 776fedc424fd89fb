"""Loading KernelBench problem files: names, knobs, input specs, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from numoracle.kernelbench import BadFile, load_problem
from numoracle.kernelbench.cases import float64_bytes
from numoracle.kernelbench.census import classify, problem_ops


def test_problem_loads_names_knobs_and_specs(problems: Path) -> None:
    p = load_problem(problems / "gemm_gelu.py")
    assert p.input_names == ("x",)
    assert p.knobs == {"batch_size": 8, "in_features": 16, "out_features": 12}
    (spec,) = p.input_specs()
    assert (spec.name, spec.shape, spec.dtype, spec.factory) == ("x", (8, 16), torch.float32,
                                                                "rand")
    assert p.init_args() == [16, 12, 0.5]


def test_knobs_change_sizes_consistently_and_are_restored(problems: Path) -> None:
    p = load_problem(problems / "gemm_gelu.py")
    sizes = {"batch_size": 3, "in_features": 5}
    assert p.input_specs(sizes)[0].shape == (3, 5)
    assert p.init_args(sizes)[0] == 5
    model = p.model(sizes)
    assert model(p.inputs(sizes)[0]).shape == (3, 12)
    assert p.input_specs()[0].shape == (8, 16)  # the official values are back


def test_official_inputs_are_never_allocated(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def forward(self, x):\n        return x.relu()\n\n\n"
                   "def get_inputs():\n    return [torch.triu(torch.rand(1 << 20, 1 << 20))]\n\n\n"
                   "def get_init_inputs():\n    return []\n")
    (spec,) = load_problem(big).input_specs()  # 4 TiB if it were allocated
    assert spec.shape == (1 << 20, 1 << 20)
    assert spec.factory == "derived"


def test_inputs_are_seeded(problems: Path) -> None:
    p = load_problem(problems / "matmul.py")
    a, b = p.inputs(seed=3), p.inputs(seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], p.inputs(seed=4)[0])


@pytest.mark.gpu
def test_inputs_drawn_on_a_gpu_are_seeded_host_arrays_of_the_official_shapes(
        problems: Path) -> None:
    p = load_problem(problems / "matmul.py")
    a, b = p.inputs(seed=3, device="cuda"), p.inputs(seed=3, device="cuda")
    host = p.inputs(seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert all(x.device.type == "cpu" and x.shape == h.shape and x.dtype == h.dtype
               for x, h in zip(a, host, strict=True))
    assert not torch.equal(a[0], p.inputs(seed=4, device="cuda")[0])
    assert float(a[0].min()) >= 0.0 and float(a[0].max()) < 1.0  # torch.rand's range


def test_a_gpu_judgement_draws_on_the_host_unless_told(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    from numoracle.kernelbench.judge import DRAWS_VARIABLE, draws_on  # noqa: PLC0415

    monkeypatch.delenv(DRAWS_VARIABLE, raising=False)
    assert draws_on("cpu") == "cpu" and draws_on("cuda") == "cpu"
    monkeypatch.setenv(DRAWS_VARIABLE, "device")
    assert draws_on("cpu") == "cpu"  # no GPU to draw on: the host
    want = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert draws_on("cuda:0") == want


def test_dropout_knob_is_found(problems: Path) -> None:
    assert load_problem(problems / "dropout.py").dropout_off() == {"dropout_p": 0.0}
    assert load_problem(problems / "relu.py").dropout_off() == {}


_GOOD_FUNCTIONS = ("def get_inputs():\n    return [torch.rand(2, 2)]\n\n"
                   "def get_init_inputs():\n    return []\n")
_MODEL = ("import torch.nn as nn\n\nclass Model(nn.Module):\n"
          "    def forward(self, x):\n        return x\n\n")
BAD_FILES = {
    "syntax_error": ("import torch\ndef get_inputs(:\n    return []\n", "syntax error at line 2"),
    "no_model": ("import torch\n" + _GOOD_FUNCTIONS, "does not define Model"),
    "raising_inputs": ("import torch\n" + _MODEL + _GOOD_FUNCTIONS.replace(
        "return [torch.rand(2, 2)]", "raise RuntimeError('no inputs today')"),
        "get_inputs() raised RuntimeError: no inputs today"),
    "not_a_list": ("import torch\n" + _MODEL + _GOOD_FUNCTIONS.replace(
        "return [torch.rand(2, 2)]", "return torch.rand(2, 2)"), "returned Tensor"),
    "raising_import": ("raise ImportError('no such extension')\n",
                       "raised ImportError while loading: no such extension"),
}


def bad_file(folder: Path, name: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(BAD_FILES[name][0])
    return path


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_files_are_refused_in_one_sentence(tmp_path: Path, name: str) -> None:
    words = BAD_FILES[name][1]
    with pytest.raises(BadFile) as info:
        load_problem(bad_file(tmp_path, name)).input_specs()
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="does not exist"):
        load_problem(tmp_path / "missing.py")


def test_census_lists_aten_ops_and_what_is_missing(problems: Path) -> None:
    ops = problem_ops(load_problem(problems / "gemm_gelu.py"))
    assert "aten.addmm.default" in ops.ops and "aten.gelu.default" in ops.ops
    assert ops.output_dtypes == ["float32"]
    entry = classify(problems / "gemm_gelu.py", rules={"aten.addmm.default": None})
    assert entry.status == "abstains"
    assert "aten.gelu.default" in entry.missing and "aten.addmm.default" not in entry.missing
    everything = dict.fromkeys(ops.ops)
    assert classify(problems / "gemm_gelu.py", rules=everything).status == "judged"


def test_census_switches_dropout_off_and_says_so(problems: Path) -> None:
    entry = classify(problems / "dropout.py", rules={})
    assert not any("bernoulli" in op or "dropout" in op for op in entry.ops)
    assert "dropout_p=0" in entry.reason


def test_census_refuses_a_bad_file(tmp_path: Path) -> None:
    entry = classify(bad_file(tmp_path, "no_model"), rules={})
    assert entry.status == "refused" and "Model" in entry.reason


def test_a_shape_computed_from_a_knob_follows_it(problems: Path) -> None:
    p = load_problem(problems / "cross_entropy.py")
    assert "num_classes" in p.knobs and "input_shape" not in p.knobs
    logits, labels = p.input_specs({"num_classes": 5, "batch_size": 3})
    assert logits.shape == (3, 5) and labels.shape == (3,)
    assert p.module.input_shape == (10,)  # restored after the block


def test_the_float64_floor_counts_a_model_with_a_scalar_argument(tmp_path: Path) -> None:
    path = tmp_path / "scale.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\n"
                    "class Model(nn.Module):\n"
                    "    def forward(self, A, s):\n        return A * s\n\n\n"
                    "M = 4096\nN = 1024\n\n\n"
                    "def get_inputs():\n    return [torch.rand(M, N), 3.14]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    problem = load_problem(path)
    assert float64_bytes(problem, {}) == 8 * 2 * 4096 * 1024  # the input and the output
