"""The candidate's process: large host arrays of a case reach it through the shared
inputs file, not pickled through the socket (verdicts are those of the socket's path);
running out of memory anywhere in its case is the machine's, not the candidate's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle.kernelbench import sandbox
from numoracle.kernelbench.judge import judge


@pytest.fixture
def every_array_shared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every non-empty input and parameter handed over in the shared file; how many
    were, per request."""
    counts: list[int] = []
    shared = sandbox.Sandbox._shared

    def spy(self: Any, request: Any) -> Any:
        out = shared(self, request)
        counts.append(sum(isinstance(v, sandbox.SharedInput)
                          for k in ("first", "second") for v in out.get(k, ())))
        counts[-1] += sum(isinstance(v, sandbox.SharedInput)
                          for v in out.get("state", {}).values())
        return out

    monkeypatch.setattr(sandbox, "SHARED_INPUT_BYTES", 1)
    monkeypatch.setattr(sandbox.Sandbox, "_shared", spy)
    return counts


@pytest.mark.parametrize(("problem", "candidate", "status", "words"), [
    ("gemm_gelu", "gemm_gelu_correct", "pass", "within"),
    ("gemm_gelu", "gemm_gelu_last_row", "fail", "outside the bound"),
    ("relu", "relu_mutates", "fail", "shares memory with input"),
])
def test_shared_inputs_keep_the_verdicts(problems: Path, candidates: Path, problem: str,
                                         candidate: str, status: str, words: str,
                                         every_array_shared: list[int]) -> None:
    j = judge(problems / f"{problem}.py", candidates / f"{candidate}.py", examples=0)
    assert j.status == status and words in j.reason, j.reason
    assert every_array_shared and every_array_shared[0] >= 2  # both draws at least


def test_a_shared_array_reads_back_as_written(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "SHARED_INPUT_BYTES", 64)
    box = sandbox.Sandbox(tmp_path / "none.py", "cpu", 10.0)
    try:
        a = np.arange(3 * 6, dtype=np.float32).reshape(3, 6)  # 72 bytes: shared
        b = np.asfortranarray(np.arange(4 * 2, dtype=np.int64).reshape(4, 2))
        small = np.ones(3, dtype=np.float32)  # 12 bytes: pickled
        sent = box._shared({"first": [a, 7, small], "second": [a], "state": {"w": b}})
        assert isinstance(sent["first"][0], sandbox.SharedInput) and sent["first"][1] == 7
        assert sent["first"][2] is small
        got, mapped = sandbox._opened(dict(sent))
        assert mapped is not None
        np.testing.assert_array_equal(got["first"][0], a)
        np.testing.assert_array_equal(got["state"]["w"], b)
        got["second"][0][0, 0] = -1.0  # a private mapping: the file keeps its bytes
        again, other = sandbox._opened(dict(sent))
        assert again["second"][0][0, 0] == 0.0
        del got, again
    finally:
        box.close()


def test_without_room_in_shared_memory_the_request_is_pickled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "SHARED_INPUT_BYTES", 64)
    box = sandbox.Sandbox(tmp_path / "none.py", "cpu", 10.0)
    folders = box.folders
    try:
        box.folders = folders[-1:]  # no /dev/shm: nothing written to disk for it
        a = np.ones(100, dtype=np.float64)
        sent = box._shared({"first": [a], "second": [a], "state": {}})
        assert sent["first"][0] is a and "shared_inputs" not in sent
    finally:
        box.folders = folders
        box.close()


def test_a_shared_file_that_cannot_be_written_leaves_the_request_pickled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "SHARED_INPUT_BYTES", 64)
    box = sandbox.Sandbox(tmp_path / "none.py", "cpu", 10.0)
    try:
        box.inputs = str(tmp_path / "gone" / "inputs")  # its folder removed: cannot open
        a = np.ones(100, dtype=np.float64)
        sent = box._shared({"first": [a], "second": [a], "state": {}})
        assert sent["first"][0] is a and "shared_inputs" not in sent
    finally:
        box.inputs = None
        box.close()


def test_running_out_of_memory_outside_the_call_is_not_the_candidates_fault() -> None:
    import torch  # noqa: PLC0415 - the exceptions' types

    assert sandbox.fault_kind(torch.OutOfMemoryError("CUDA out of memory. Tried to "
                                                     "allocate 256.00 MiB")) == "oom"
    assert sandbox.fault_kind(MemoryError()) == "oom"
    assert sandbox.fault_kind(RuntimeError("CUDA error: an illegal memory access was "
                                           "encountered")) == "cuda"
    assert sandbox.fault_kind(SystemExit(3)) == "exit"
    assert sandbox.fault_kind(ValueError("wrong shape")) == "raise"
