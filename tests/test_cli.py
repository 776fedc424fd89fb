"""The command line, run in-process: list, run with a JSON report, replay,
zoo, and usage errors that exit 2 with a message saying what to change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numoracle import KernelMismatch, check_kernel
from numoracle.cli import main

REPORT_KEYS = {"target", "op", "precision", "cases", "failures", "worst_ratio", "verdict",
               "repro"}
ZOO_KEYS = {"mutant", "op", "caught", "cases_to_catch", "repro_shape", "diagnosis", "repro"}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables on one line a row (pytest-xdist workers set COLUMNS=80)."""
    monkeypatch.setenv("COLUMNS", "200")


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for text in ("linear", "matmul", "grad_bias", "in_features", "numpy-fp32", "can run here",
                 "fp32 storage"):
        assert text in out
    assert out.index("can run here") < out.index("ops")  # what can run here first


def test_list_fits_100_columns_when_piped(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from numoracle.cli import listing
    from numoracle.kernels import all_targets

    monkeypatch.delenv("COLUMNS")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= listing.LIST_WIDTH
    missing = [t.name for t in all_targets() if t.unavailable_reason() is not None]
    if missing:  # summarised by reason, every name once; --all gives one row each
        assert "cannot run here" in out and all(name in out for name in missing)
        assert main(["list", "--all"]) == 0
        assert "why not" in capsys.readouterr().out


def test_run_writes_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "--targets", "numpy-fp32", "--ops", "linear", "--examples", "5",
                   "--report", str(tmp_path / "rep"), "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert len(rows) == 1 and REPORT_KEYS <= set(rows[0])
    row = rows[0]
    assert (row["target"], row["op"], row["precision"]) == ("numpy-fp32", "linear", "fp32")
    assert row["cases"] >= 1
    assert status == (0 if row["verdict"] == "pass" else 1), out
    assert "numpy-fp32" in out and "worst_ratio" in out


def test_run_lists_skipped_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numoracle.kernels import get_target

    reason = get_target("cupy-fp32", "matmul").unavailable_reason()
    if reason is None:
        pytest.skip("cupy runs here")
    status = main(["run", "--targets", "cupy-fp32", "--ops", "matmul", "--examples", "2",
                   "--report", str(tmp_path), "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    assert status == 1  # nothing could be checked
    assert "skipped (cannot run here): cupy-fp32" in out and "nothing was checked" in out
    assert json.loads((tmp_path / "report.json").read_text())[0]["verdict"] == "skipped"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--examples", "0"], "--examples: '0' is not a positive int"),
        (["run", "--examples", "many"], "'many' is not a positive int"),
        (["run", "--seed", "x"], "'x' is not an int"),
        (["run", "--ops", ","], "names nothing"),
        (["run", "--ops", "conv7d"],  # other tests register ops of their own at run time
         "op 'conv7d' is unknown; use one of ['"),
        (["run", "--targets", "nope"], "--targets names unknown targets ['nope']"),
        (["zoo", "--zoo", "/nonexistent/zoo"], "pass --zoo PATH"),
        (["replay", "/nonexistent/repro"], "is not a repro"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "numoracle 0.1.0"


def bias_twice(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A linear layer that adds its bias twice."""
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + 2 * bias
        out["grad_bias"] = grad_output.sum(axis=0)
    out["y"] = y
    return out


def test_replay_a_check_kernel_repro(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KernelMismatch) as info:
        check_kernel(bias_twice, op="linear", examples=50, store=tmp_path)
    repro = str(info.value).splitlines()[-1].split("numoracle replay ")[-1]
    assert main(["replay", repro]) == 1
    out = capsys.readouterr().out
    # the kernel lives in a test module: replay finds it there and runs it again
    assert out.startswith("FAIL: bias_twice on linear")
    assert "still fails" in out and f"numoracle replay {repro}" in out


def test_zoo_writes_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["zoo", "--ops", "linear", "--examples", "50",
                   "--report", str(tmp_path), "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "zoo.json").read_text())
    assert rows and all(ZOO_KEYS <= set(r) for r in rows)
    assert status == (0 if all(r["caught"] for r in rows) else 1), out
    caught = [r for r in rows if r["caught"]]
    assert all(r["repro"] and r["repro_shape"] and r["cases_to_catch"] for r in caught)
    assert f"caught {len(caught)} of {len(rows)} mutants" in out


def test_zoo_without_mutants_for_the_op(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.py").write_text("TARGETS = []\n")
    assert main(["zoo", "--zoo", str(tmp_path), "--ops", "matmul"]) == 2
    assert "has no mutant computing ['matmul']" in capsys.readouterr().err
