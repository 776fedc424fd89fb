"""The user's loop on their own kernels: a check fails, the kernel is fixed in its
file, ``numoracle replay`` re-runs it and says "fixed", ``store prune --fixed``
removes the repro; a kernel that cannot be found again is "could not re-run"
with the reason, never a verdict on the recorded outputs unless asked.

Each "new process" is simulated by dropping the user's module from
``sys.modules``, so that replay imports the fixed file as a new process would.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from numoracle import check_kernel
from numoracle.callables import default_name, digest, identity, load_ref, locate
from numoracle.cli import main
from numoracle.errors import InvalidArgument, KernelMismatch
from numoracle.store.store import entries

BUGGY = """from numoracle.zoo.linear import bias_added_twice, correct_linear


def layer(x, weight, grad_output, bias=None):
    return bias_added_twice(x, weight, grad_output, bias)
"""
FIXED = BUGGY.replace("return bias_added_twice(", "return correct_linear(")


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A module of the user's in the working folder (not on sys.path but for it)."""
    name = f"userkernels_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(BUGGY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, path
    sys.modules.pop(name, None)


def _fresh(name: str) -> None:
    sys.modules.pop(name, None)  # as a new process starts


def test_check_kernel_fix_replay_prune(user_module: tuple[str, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    name, path = user_module
    store = path.parent / "store"
    with pytest.raises(KernelMismatch):
        check_kernel(load_ref(f"{name}:layer"), op="linear", examples=30, store=store)
    (e,) = entries(store)
    meta = json.loads((e.path / "repro.json").read_text())
    assert meta["target"]["kernel"]["module"] == name
    assert meta["target"]["kernel"]["identity"] == f"{name}:layer"
    _fresh(name)
    assert main(["replay", str(e.path)]) == 1
    assert "still fails" in capsys.readouterr().out
    path.write_text(FIXED)
    _fresh(name)
    assert main(["replay", str(e.path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: layer on linear") and "fixed" in out
    # the recorded outputs still fail: judged only when asked
    assert main(["replay", "--recorded", str(e.path)]) == 1
    assert "recorded outputs" in capsys.readouterr().out
    # check_kernel marks it fixed; prune re-runs it, keeps it fixed and removes it
    _fresh(name)
    result = check_kernel(load_ref(f"{name}:layer"), op="linear", examples=5, store=store)
    assert result.fixed == [str(e.path)]
    _fresh(name)
    assert main(["store", "prune", "--fixed", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "fixed" in out and "removed 1 repro(s)" in out
    assert entries(store) == []


def test_shrink_fn_file_fix_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(BUGGY)
    rng = np.random.default_rng(0)
    np.savez("step.npz", x=rng.integers(-2, 3, (3, 4)).astype(np.float32),
             weight=rng.integers(-2, 3, (2, 4)).astype(np.float32),
             grad_output=rng.integers(-2, 3, (3, 2)).astype(np.float32),
             bias=np.ones(2, np.float32))
    assert main(["shrink", "step.npz", "--op", "linear", "--fn", "mine.py:layer",
                 "--store", "store"]) == 1
    (e,) = entries(tmp_path / "store")
    kernel = json.loads((e.path / "repro.json").read_text())["target"]["kernel"]
    assert kernel["file"] == str(tmp_path / "mine.py") and kernel["function"] == "layer"
    capsys.readouterr()
    (tmp_path / "mine.py").write_text(FIXED)
    assert main(["replay", str(e.path)]) == 0
    assert "fixed" in capsys.readouterr().out
    assert main(["replay", "--all", "--store", "store"]) == 0
    assert main(["store", "prune", "--fixed", "--store", "store"]) == 0
    assert entries(tmp_path / "store") == []


def test_a_lambda_kernel_could_not_be_rerun_and_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KernelMismatch):
        check_kernel(lambda a, b: {"out": a @ b + 1}, op="matmul", examples=20,
                     store=tmp_path)
    (e,) = entries(tmp_path)
    assert e.target.startswith("lambda_") and "<lambda>" not in e.target
    assert main(["replay", str(e.path)]) == 2
    out = capsys.readouterr().out
    assert "could not re-run" in out and "lambda" in out and "FAIL" not in out
    # prune keeps it: it cannot be re-run and its last replay did not pass
    assert main(["store", "prune", "--fixed", "--store", str(tmp_path)]) == 0
    assert "could not re-run" in capsys.readouterr().out and len(entries(tmp_path)) == 1


def test_identities_of_lambdas_differ_and_are_stable() -> None:
    def make(k: int):  # noqa: ANN202 - a closure over k
        return lambda a, b: {"out": a @ b + k}

    one, two = (lambda a, b: {"out": a @ b}), (lambda a, b: {"out": a @ b * 2})
    assert default_name(one) != default_name(two) and "<" not in default_name(one)
    assert identity(make(1)) != identity(make(2))  # the closure's values count
    assert identity(make(1)) == identity(make(1)) and digest(one) == digest(one)
    assert locate(one) is None and locate(np.linalg.norm)["module"] == "numpy.linalg"
    assert identity(check_kernel) == "numoracle.api:check_kernel"


def test_two_kernels_of_one_name_do_not_replay_each_others_repros(
        user_module: tuple[str, Path], tmp_path: Path) -> None:
    name, path = user_module
    other = tmp_path / "elsewhere.py"
    other.write_text(FIXED)
    store = tmp_path / "store"
    with pytest.raises(KernelMismatch):
        check_kernel(load_ref(f"{name}:layer"), op="linear", examples=30, store=store)
    # a correct kernel of the same name in another file: not fixed by it
    result = check_kernel(load_ref("elsewhere.py:layer"), op="linear", examples=5, store=store)
    assert result.replayed == 0 and entries(store)[0].status != "fixed"


@pytest.mark.parametrize(("ref", "says"), [
    ("nowhere_module_x:f", "cannot be imported"),
    ("missing.py:f", "does not exist here"),
    ("numpy", "'module:name' or 'file.py:name'"),
    ("numpy:no_such_thing", "has no 'no_such_thing'"),
])
def test_load_ref_errors(ref: str, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        load_ref(ref)


def test_run_kernel_against_a_reference_from_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    tag = uuid.uuid4().hex[:8]
    refs = f"refs_{tag}"
    (tmp_path / f"{refs}.py").write_text(f"import torch\n\ndef act_{tag}(x):\n"
                                         "    return torch.tanh(x)\n")
    (tmp_path / "mine.py").write_text("import torch\n\ndef act(x):\n"
                                      "    return {'out': torch.sigmoid(x)}\n")
    argv = ["run", "--reference", f"{refs}:act_{tag}", "--inputs", "x=batch,n",
            "--dims", "n=1:8", "--kernel", "mine.py:act", "--examples", "8",
            "--budget", "300", "--store", "store"]
    try:
        assert main(argv) == 1
        (e,) = entries(tmp_path / "store")
        meta = json.loads((e.path / "repro.json").read_text())
        assert meta["op_spec"]["reference"] == f"{refs}:act_{tag}"
        assert meta["op_spec"]["reference_hash"] and meta["target"]["kernel"]["file"]
        capsys.readouterr()
        (tmp_path / "mine.py").write_text("import torch\n\ndef act(x):\n"
                                          "    return {'out': torch.tanh(x)}\n")
        assert main(["replay", str(e.path)]) == 0
        assert "fixed" in capsys.readouterr().out
        assert main(["store", "prune", "--fixed", "--store", "store"]) == 0
        assert entries(tmp_path / "store") == []
    finally:
        sys.modules.pop(refs, None)


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "--kernel", "mine:act"], "--kernel acts only with --reference"),
    (["run", "--inputs", "x=n"], "--inputs acts only with --reference"),
    (["run", "--reference", "torch:tanh", "--inputs", "x=n", "--backend", "numpy"],
     "--backend acts only with --kernel"),
    (["run", "--reference", "torch:tanh", "--inputs", "x=n", "--targets", "numpy-fp32"],
     "--targets does not apply with --reference"),
    (["run", "--block-size", "10"], "--block-size acts only with --cluster"),
    (["shrink", "x.npz", "--op", "linear", "--target", "numpy-fp32", "--precision", "tf32"],
     "--precision acts only with --fn"),
    (["shrink", "x.npz", "--op", "linear", "--fn", "m:f", "--source", "z.py"],
     "--source acts only with --target"),
    (["replay", "--all", "--recorded"], "--recorded judges one repro"),
    (["store", "prune", "--recorded", "--targets", "a"], "give --fixed with it"),
])
def test_an_option_that_cannot_act_is_an_error(argv: list[str], says: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert says in capsys.readouterr().err
