"""Offline mode: `numoracle cases` writes a case set, a program writes its
outputs beside the inputs, `numoracle judge` judges them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numoracle.cli import main
from numoracle.errors import InvalidArgument
from numoracle.foreign import judge_folder, write_cases


def _compute(folder: Path, *, misorder: str | None = None) -> None:
    """A foreign program computing linear in float32; ``misorder`` writes that
    output's memory in column-major order under a row-major header."""
    m = json.loads((folder / "manifest.json").read_text())
    a = {k: np.load(folder / v["file"]) for k, v in m["inputs"].items()}
    x, w, g = a["x"], a["weight"], a["grad_output"]
    with np.errstate(all="ignore"):
        out = {"y": x @ w.T + a.get("bias", 0), "grad_input": g @ w,
               "grad_weight": g.T @ x, "grad_bias": g.sum(0)}
    for name, info in m["outputs"].items():
        arr = out[name].astype(np.float32)
        if name == misorder:
            arr = arr.ravel(order="F").reshape(arr.shape)
        np.save(folder / info["file"], arr)


def _case_set(tmp_path: Path, n: int = 12) -> Path:
    out = tmp_path / "cases"
    assert main(["cases", "--op", "linear", "--examples", str(n), "--max-elements", "256",
                 "--out", str(out)]) == 0
    return out


def test_cases_are_reproducible_and_complete(tmp_path: Path) -> None:
    a = _case_set(tmp_path / "a")
    b = _case_set(tmp_path / "b")
    top = json.loads((a / "manifest.json").read_text())
    assert len(top["cases"]) == 12
    assert top == json.loads((b / "manifest.json").read_text())
    first = json.loads((a / "case_0000" / "manifest.json").read_text())
    assert set(first["outputs"]) >= {"y", "grad_input", "grad_weight"}
    for name, info in first["inputs"].items():
        arr = np.load(a / "case_0000" / info["file"])
        assert list(arr.shape) == info["shape"] and arr.dtype == np.float32, name
        assert np.array_equal(arr, np.load(b / "case_0000" / info["file"]), equal_nan=True)


def test_judge_passes_correct_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = _case_set(tmp_path)
    for folder in sorted(out.glob("case_*")):
        _compute(folder)
    assert main(["judge", str(out), "--store", str(tmp_path / "repros")]) == 0
    assert "all 12 cases pass" in capsys.readouterr().out


def test_judge_names_the_smallest_failure_and_its_layout(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    out = _case_set(tmp_path)
    for folder in sorted(out.glob("case_*")):
        _compute(folder, misorder="grad_weight")
    report = tmp_path / "judge.json"
    assert main(["judge", str(out), "--store", str(tmp_path / "repros"),
                 "--report", str(report)]) == 1
    text = capsys.readouterr().out
    summary = json.loads(report.read_text())
    assert summary["failures"] >= 1
    sizes = {r["folder"]: r["size"] for r in summary["verdicts"] if not r["passed"]}
    assert summary["smallest_failing"] == min(sizes, key=sizes.get)
    assert f"the smallest failing case is {summary['smallest_failing']}" in text
    assert ("grad_weight is right once its memory is read in layout 'F': the kernel writes "
            "grad_weight as F, but it is declared 'C'") in summary["layout"]
    assert "replay: numoracle replay" in text  # a repro of the recorded outputs


def test_missing_outputs_fail_with_the_reason(tmp_path: Path) -> None:
    out = _case_set(tmp_path, n=3)
    res = judge_folder(out)
    assert res.failures == 3
    assert all("the program wrote no y.npy" in v.error for _, v in res.verdicts)


def test_bad_offline_arguments(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(InvalidArgument, match="is not empty"):
        write_cases(tmp_path / "full", op="linear")
    with pytest.raises(InvalidArgument, match=r"holds no manifest\.json"):
        judge_folder(tmp_path)
    assert main(["cases", "--op", "nosuchop", "--out", str(tmp_path / "n")]) == 2
    assert main(["cases", "--op", "linear", "--layouts", "weight", "--out",
                 str(tmp_path / "n")]) == 2
