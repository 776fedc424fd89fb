"""``numoracle kernelbench``: the table, the exit status, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numoracle.cli import main
from numoracle.cli.kernelbench import judge_all


def test_a_folder_of_candidates_in_one_run(problems: Path, candidates: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cands"
    folder.mkdir()
    for name in ("relu_correct", "relu_identity"):
        (folder / f"{name}.py").write_text((candidates / f"{name}.py").read_text())
    report = tmp_path / "report.json"
    status = main(["kernelbench", str(problems / "relu.py"), str(folder), "--examples", "8",
                   "--no-isolate", "--report", str(report)])
    assert status == 1
    rows = {Path(r["candidate"]).stem: r for r in json.loads(report.read_text())}
    assert rows["relu_correct"]["status"] == "pass"
    assert rows["relu_identity"]["status"] == "fail"
    assert "--case" in rows["relu_identity"]["replay"]
    out = capsys.readouterr().out
    assert "relu_identity" in out and "replay: numoracle kernelbench" in out


def test_exit_zero_only_when_every_candidate_passes(problems: Path, candidates: Path) -> None:
    assert main(["kernelbench", str(problems / "relu.py"),
                 str(candidates / "relu_correct.py"), "--examples", "2", "--no-isolate",
                 "--precision", "fp32,bf16"]) == 0


@pytest.mark.parametrize("text", ["def ModelNew(:\n", "import torch\nX = 1\n"])
def test_bad_candidate_files_exit_2_in_one_line(problems: Path, tmp_path: Path, text: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    assert main(["kernelbench", str(problems / "relu.py"), str(bad), "--no-isolate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("numoracle kernelbench: candidate file bad.py")
    assert len(err.splitlines()) == 1


def test_a_bad_problem_file_exits_2(candidates: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "problem.py"
    bad.write_text("import torch\n")
    assert main(["kernelbench", str(bad), str(candidates / "relu_correct.py")]) == 2
    assert "does not define Model" in capsys.readouterr().err


def test_a_bad_precision_is_a_usage_error(problems: Path, candidates: Path) -> None:
    assert main(["kernelbench", str(problems / "relu.py"), str(candidates / "relu_correct.py"),
                 "--precision", "fp8"]) == 2


def test_candidates_judged_side_by_side_on_two_gpus_give_the_judgements_of_one(
        problems: Path, candidates: Path) -> None:
    options = {"examples": 4, "seed": 0, "device": "cpu", "timeout": 60.0, "case": None,
               "isolated": False}
    jobs = [(problems / "relu.py", candidates / f"{name}.py", "fp32", options)
            for name in ("relu_correct", "relu_identity")]
    here = judge_all(jobs)
    there = judge_all(jobs, devices=("0", "1"))  # a process per (stand-in) GPU
    assert [j.status for j in there] == [j.status for j in here] == ["pass", "fail"]
    assert [j.cases for j in there] == [j.cases for j in here]


def test_several_candidates_judged_at_once(problems: Path, candidates: Path,
                                           tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    status = main(["kernelbench", str(problems / "relu.py"),
                   str(candidates / "relu_correct.py"), str(candidates / "relu_identity.py"),
                   "--examples", "6", "--no-isolate", "--jobs", "2", "--report", str(report)])
    assert status == 1
    rows = [(Path(r["candidate"]).stem, r["status"]) for r in json.loads(report.read_text())]
    assert rows == [("relu_correct", "pass"), ("relu_identity", "fail")]


def test_a_missing_package_exits_3(problems: Path, candidates: Path) -> None:
    assert main(["kernelbench", str(problems / "relu.py"),
                 str(candidates / "relu_needs_triton.py"), "--no-isolate"]) == 3
