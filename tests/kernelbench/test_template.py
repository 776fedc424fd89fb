"""The candidates' processes forked from the template: started, timed, their exits told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from numoracle.kernelbench.sandbox import Sandbox
from numoracle.kernelbench.template import template

DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.slow  # each start imports torch (a few seconds on a busy machine)


@pytest.mark.parametrize("forked", [True, False])
def test_a_candidates_process_starts_forked_or_fresh(forked: bool) -> None:
    box = Sandbox(DATA / "candidates" / "relu_correct.py", "cpu", 60.0,
                  readable=[DATA / "problems" / "relu.py"], template=forked)
    try:
        assert box.prepare() is None
        assert "loading the candidate" in box.laps and box.started_in > 0
    finally:
        box.close()


def test_an_exit_at_import_is_told_with_its_code(tmp_path: Path) -> None:
    cand = tmp_path / "exits.py"
    cand.write_text("import os\n\nos._exit(3)\n")
    box = Sandbox(cand, "cpu", 60.0)
    try:
        why = box.prepare()
    finally:
        box.close()
    assert why is not None and "exited with code 3" in why


def test_a_killed_child_is_told_as_a_signal(tmp_path: Path) -> None:
    cand = tmp_path / "sleeps.py"
    cand.write_text("import time\n\ntime.sleep(60)\n")
    box = Sandbox(cand, "cpu", 60.0)
    try:
        r, w = os.pipe()
        child = template().fork(w, {"candidate": str(cand), "device": "cpu",
                                    "shared": box.folders, "judge_dir": str(tmp_path),
                                    "readable": [], "env": {}})
        assert child.poll() is None
        child.kill()
        assert child.wait(30) == -9
    finally:
        os.close(r)
        box.close()
