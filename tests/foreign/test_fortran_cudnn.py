"""The Fortran program that calls the CUDA runtime and cuDNN (conv2d forward,
backward data, backward filter, bias gradient) as a shared-library target.

Without a GPU its bindings run against a CPU stand-in with cuDNN's symbols and
semantics (``examples/fortran_cudnn/cpu_standin.c``): the correct program
passes, seed 000's weight-layout trap is caught with the layout named, and
libraries that cannot be loaded give a failing verdict that says so. On a GPU
machine the same checks run on cuDNN itself (``@pytest.mark.gpu``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from numoracle.foreign import run

HERE = Path(__file__).resolve().parents[2] / "examples" / "fortran_cudnn"
SRC = str(HERE / "conv2d_cudnn.F90")


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("check_conv2d_cudnn",
                                                  HERE / "check_conv2d_cudnn.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FC = _example()


def _lib(build: Any, define: str | None, tag: str) -> Path:
    """The program built with ``-Ddefine`` under a name of its own (each library
    keeps the CUDA and cuDNN it loaded first)."""
    return build("gfortran", "-O2", "-cpp", "-shared", "-fPIC", "-J", "{dir}",
                 *([f"-D{define}"] if define else []), SRC, "-o", "{out}",
                 out=f"libconv2d_cudnn_{tag}.so")


def _target(build: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, define: str | None,
            tag: str, runtime: str) -> Any:
    monkeypatch.setenv("NUMORACLE_CUDART", runtime)
    monkeypatch.setenv("NUMORACLE_CUDNN", runtime)
    lib = _lib(build, define, tag)
    return FC.shared_library_target(lib, "conv2d_cudnn", op="conv2d", precision="fp32",
                                    args=FC.ARGS, layouts=FC.LAYOUTS, returns="status",
                                    isolate=False, spec_dir=tmp_path)


@pytest.fixture
def standin(build: Any) -> str:
    return str(build("gcc", "-O2", "-shared", "-fPIC", str(HERE / "cpu_standin.c"), "-o",
                     "{out}", out="libcudnn_cpu_standin.so"))


def test_correct_program_passes_on_the_standin(build: Any, tmp_path: Path, standin: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    res = run(_target(build, tmp_path, monkeypatch, None, "standin", standin),
              examples=15, store=None)
    assert res.verdict == "pass", res.message


@pytest.mark.parametrize(("define", "wrong", "named"), [
    ("LAYOUT_TRAP_GRAD", "grad_weight",
     "grad_weight is right once its memory is read in layout 'OIHW': the kernel writes "
     "grad_weight as OIHW, but it is declared 'OIHW:F'"),
    ("LAYOUT_TRAP", "y",
     "are right for weight read in layout 'OIHW': the kernel reads weight as OIHW, but it "
     "is declared 'OIHW:F'"),
])
def test_weight_layout_trap_is_named(build: Any, tmp_path: Path, standin: str,
                                     monkeypatch: pytest.MonkeyPatch, shapes_of: Any,
                                     define: str, wrong: str, named: str) -> None:
    res = run(_target(build, tmp_path, monkeypatch, define, define.lower(), standin),
              examples=15, store=tmp_path / "r")
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith(f"{wrong}: exceeds every precision model")
    assert named in res.diagnosis
    shapes = shapes_of(res.repro_shape)  # two taps at least: one tap has one layout
    assert 2 <= shapes["weight"][2] * shapes["weight"][3] <= 9


def test_libraries_that_do_not_load_fail_the_case(build: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    t = _target(build, tmp_path, monkeypatch, None, "missing", str(tmp_path / "no-such.so"))
    res = run(t, examples=2, store=None)
    assert res.verdict == "FAIL" and "returned status 101" in res.message


@pytest.mark.gpu
def test_correct_program_passes_on_cudnn(build: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    libs = FC.find_libraries()
    t = _target(build, tmp_path, monkeypatch, None, "cudnn", libs["NUMORACLE_CUDART"])
    monkeypatch.setenv("NUMORACLE_CUDNN", libs["NUMORACLE_CUDNN"])
    assert run(t, examples=30, store=None).verdict == "pass"
