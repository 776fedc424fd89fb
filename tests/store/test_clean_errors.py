"""Mistakes with repros, stores and shrink inputs: one line on stderr saying
what is wrong and what to do, exit status 2, never a traceback or a verdict
on nothing; and a repro whose failure needs earlier calls is not taken for
fixed by a replay in a fresh process."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.cli import main
from numoracle.kernels import resolve_target
from numoracle.store.repro import save_repro

CASE = Case("linear", {"batch": 2, "in_features": 3, "out_features": 2, "bias": True},
            family="exact", seed=1)


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def damaged() -> ModuleType:
    """:mod:`benchmarks.damaged`: the planted kernels' file and the damages a user does to
    a repro, shared with the mistakes benchmark (a package of the checkout)."""
    with pytest.MonkeyPatch.context() as mp:
        if str(ROOT) not in sys.path:
            mp.syspath_prepend(str(ROOT))
        return importlib.import_module("benchmarks.damaged")


@pytest.fixture
def repro(tmp_path: Path, damaged: ModuleType) -> Path:
    """A stored repro of a kernel defined in a file (found again by replay)."""
    src = tmp_path / "kernels.py"
    src.write_text(damaged.kernels_source())
    target = resolve_target("bias_twice", "linear", str(src))
    v = check_case(CASE, target)
    assert not v.passed
    return save_repro(v, target, store=tmp_path / "store")


def _fails_cleanly(argv: list[str], capsys: pytest.CaptureFixture[str], *says: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for s in says:
        assert s in err, err
    return err



def test_replay_a_corrupt_repro_json(repro: Path, tmp_path: Path, damaged: ModuleType,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = damaged.damage(repro, tmp_path / "bad", "corrupt_json")
    _fails_cleanly(["replay", str(bad)], capsys, "is damaged", "not valid JSON", "save it again")


def test_replay_a_repro_json_without_its_keys(repro: Path, tmp_path: Path, damaged: ModuleType,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = damaged.damage(repro, tmp_path / "bad", "empty_json")
    _fails_cleanly(["replay", str(bad)], capsys, "is damaged", "case or target")


def test_replay_a_corrupt_arrays_npz(repro: Path, tmp_path: Path, damaged: ModuleType,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = damaged.damage(repro, tmp_path / "bad", "corrupt_npz")
    _fails_cleanly(["replay", str(bad)], capsys, "arrays.npz is not a readable NumPy archive")


def test_replay_without_arrays_or_kernel_judges_nothing(repro: Path, tmp_path: Path,
                                                         damaged: ModuleType,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    bad = damaged.damage(repro, tmp_path / "bad", "npz_and_source_gone")
    assert not (tmp_path / "deleted.py").exists()
    assert main(["replay", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "could not re-run" in out and "does not exist" in out and "Traceback" not in out
    _fails_cleanly(["replay", "--recorded", str(bad)], capsys, "no recorded outputs")


def test_replay_without_the_kernel_says_why_and_judges_recorded_outputs_when_asked(
        repro: Path, tmp_path: Path, damaged: ModuleType,
        capsys: pytest.CaptureFixture[str]) -> None:
    gone = damaged.damage(repro, tmp_path / "gone", "source_gone")
    assert main(["replay", str(gone)]) == 2
    out = capsys.readouterr().out
    assert "could not re-run" in out and "FAIL" not in out and "--recorded" in out
    assert main(["replay", "--recorded", str(gone)]) == 1
    out = capsys.readouterr().out
    assert "the kernel was not re-run" in out and "still fails" in out


def test_a_failure_after_earlier_calls_is_not_taken_for_fixed(
        tmp_path: Path, damaged: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "kernels.py"
    src.write_text(damaged.kernels_source())
    target = resolve_target("stale_after_three", "linear", str(src))
    verdicts = [check_case(CASE, target) for _ in range(4)]
    assert [v.passed for v in verdicts] == [True, True, True, False]
    assert verdicts[-1].calls_before >= 3
    folder = save_repro(verdicts[-1], target, store=tmp_path / "store")
    # replay loads the file afresh (as a fresh process would): the counter starts again
    assert main(["replay", "--no-isolate", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "failed on run 4 of the case in this process" in out
    assert "depends on earlier calls" in out and "still fails" in out


def test_a_passing_replay_says_how_many_runs_passed(repro: Path, tmp_path: Path,
                                                    damaged: ModuleType,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fixed = tmp_path / "kernels_fixed.py"
    source = damaged.kernels_source()
    assert "2 * bias" in source
    fixed.write_text(source.replace("2 * bias", "bias"))
    meta = json.loads((repro / "repro.json").read_text())
    meta["target"]["source"] = str(fixed)
    (repro / "repro.json").write_text(json.dumps(meta))
    assert main(["replay", "--no-isolate", str(repro)]) == 0
    out = capsys.readouterr().out
    runs = re.search(r"passed (\d+) runs of the case in a fresh process", out)
    assert runs is not None and int(runs.group(1)) >= 2 and "fixed (" in out, out


def test_shrink_a_file_that_is_not_an_npz(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "not.npz").write_text("hello")
    _fails_cleanly(["shrink", str(tmp_path / "not.npz"), "--op", "linear", "--target",
                    "numpy-fp32"], capsys, "not.npz", "np.savez")


def test_shrink_a_folder_of_pickled_npy(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "arrays"
    folder.mkdir()
    np.save(folder / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _fails_cleanly(["shrink", str(folder), "--op", "linear", "--target", "numpy-fp32"],
                   capsys, "x.npy", "pickled", "never loaded", "np.save(")


def test_shrink_arrays_of_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.savez(tmp_path / "s.npz", x=np.array(["a", "b"]))
    _fails_cleanly(["shrink", str(tmp_path / "s.npz"), "--op", "linear", "--target",
                    "numpy-fp32"], capsys, "not real numbers")


@pytest.mark.parametrize(("fn", "says"), [
    ("nomodule:f", "module 'nomodule' cannot be imported"),
    ("{broken}:f", "fails while it is loaded (SyntaxError"),
])
def test_shrink_fn_that_cannot_be_loaded(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         fn: str, says: str) -> None:
    np.savez(tmp_path / "good.npz", x=np.ones((2, 3)), weight=np.ones((4, 3)),
             grad_output=np.ones((2, 4)))
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    _fails_cleanly(["shrink", str(tmp_path / "good.npz"), "--op", "linear", "--fn",
                    fn.format(broken=broken)], capsys, says)


def test_run_report_into_a_file_is_refused_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "report.txt").write_text("a file")
    assert main(["run", "--targets", "numpy-fp32", "--ops", "matmul", "--report",
                 str(tmp_path / "report.txt")]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "numoracle run" not in capsys.readouterr().out


@pytest.mark.parametrize("action", [["store", "list"], ["store", "prune", "--fixed"],
                                    ["replay", "--all"]])
def test_a_store_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     action: list[str]) -> None:
    _fails_cleanly([*action, "--store", str(tmp_path / "nowhere")], capsys, "does not exist",
                   "default .numoracle/repros")
    (tmp_path / "afile").write_text("x")
    _fails_cleanly([*action, "--store", str(tmp_path / "afile")], capsys, "is a file")


def test_the_default_store_not_made_yet_holds_no_repros(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["store", "list"]) == 0
    assert "no repros" in capsys.readouterr().out
