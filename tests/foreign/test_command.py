"""Command targets: a program exchanging .npy files, once per case or persistent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.cli import main
from numoracle.errors import InvalidArgument
from numoracle.foreign import command_target, run
from numoracle.store.repro import load_repro

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROGRAM = str(EXAMPLES / "command" / "linear_program.py")
CASE = Case("linear", {"batch": 2, "in_features": 3, "out_features": 2, "bias": True})


def test_once_per_case_passes(tmp_path: Path) -> None:
    t = command_target([sys.executable, PROGRAM], op="linear", spec_dir=tmp_path)
    res = run(t, examples=4, store=None)
    assert res.verdict == "pass" and res.cases == 4, res.message
    assert t.name == "linear_program.py"


def test_persistent_passes_and_bug_is_caught_and_replays(tmp_path: Path, shapes_of) -> None:
    good = command_target([sys.executable, PROGRAM, "--persistent"], op="linear",
                          persistent=True, spec_dir=tmp_path)
    res = run(good, examples=20, store=None)
    assert res.verdict == "pass" and res.cases == 20, res.message
    bad = command_target([sys.executable, PROGRAM, "--persistent", "--bug"], op="linear",
                         persistent=True, spec_dir=tmp_path)
    res = run(bad, examples=20, store=tmp_path / "repros")
    assert res.verdict == "FAIL"
    assert res.diagnosis.startswith("grad_input: exceeds fp32; consistent with")
    assert "fp32-fp16in" in res.diagnosis
    assert all(max(s) <= 2 for s in shapes_of(res.repro_shape).values())  # shrunk
    assert "--bug" in Path(load_repro(res.repro).source).read_text()  # the same command
    assert main(["replay", res.repro]) == 1


@pytest.mark.parametrize(("code", "persistent", "expect"), [
    ("import sys; sys.stderr.write('no GPU here'); sys.exit(3)", False,
     "the command exited with status 3; stderr: no GPU here"),
    ("import time; time.sleep(30)", False, "did not finish within 1 s"),
    ("import sys; sys.stderr.write('boom'); sys.exit(7)", True,
     "the persistent program died (exit status 7); stderr: boom"),
    ("import sys\nfor line in sys.stdin: print('error cannot read it', flush=True)", True,
     "the program reported: cannot read it"),
    ("import sys\nfor line in sys.stdin: print('done', flush=True)", True,
     "the program answered 'done'"),
    ("import time; time.sleep(30)", True, "did not answer within 1 s"),
    ("import sys\nfor line in sys.stdin: print('ok', flush=True)", True,
     "the program wrote no y.npy"),
])
def test_program_failures_are_failing_verdicts(tmp_path: Path, code: str, persistent: bool,
                                                expect: str) -> None:
    # 1 s for the programs that hang (30 s); the others get 60 s to start, however busy
    # the machine, so that only a hang can time out
    t = command_target([sys.executable, "-c", code], op="linear", persistent=persistent,
                       timeout=1.0 if "sleep" in code else 60.0, spec_dir=tmp_path)
    v = check_case(CASE, t)
    assert not v.passed
    assert expect in v.error, v.error


def test_bad_command_arguments() -> None:
    with pytest.raises(InvalidArgument, match="non-empty list of strings"):
        command_target([], op="linear")
    with pytest.raises(InvalidArgument, match=r"leave \{dir\} out"):
        command_target(["prog", "{dir}"], op="linear", persistent=True)
    with pytest.raises(InvalidArgument, match="positive number of seconds"):
        command_target(["prog"], op="linear", timeout=0)
    with pytest.raises(InvalidArgument, match="which linear does not compute"):
        command_target(["prog"], op="linear", outputs=["weight"])
