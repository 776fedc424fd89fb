"""The survey drivers' bookkeeping: the official run's order of work, the leaderboard
run's resumption."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.kernelbench.leaderboard import _done_before
from benchmarks.kernelbench.official import plan_problem, resumed
from benchmarks.kernelbench.worker import host_peak

_CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.{kind}(c, c, 3, stride={stride})

    def forward(self, x):
        return self.conv(x)


batch_size = 4
channels = 8
size = {size}


def get_inputs():
    return [torch.rand(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels]
'''


def test_a_transposed_convolution_is_planned_as_more_work(tmp_path: Path) -> None:
    direct = tmp_path / "1_conv.py"
    direct.write_text(_CONV.format(kind="Conv2d", stride=1, size=34))
    transposed = tmp_path / "2_conv_transposed.py"
    transposed.write_text(_CONV.format(kind="ConvTranspose2d", stride=2, size=16))
    a, b = plan_problem(str(direct)), plan_problem(str(transposed))
    assert a["work"] > 0 and b["work"] > 0
    # the transposed one has a quarter of the direct one's multiply-adds (its input is
    # 16x16), but the oracle's work on it is weighted by its stride: it is started first
    assert b["work"] > 2 * a["work"]


def test_a_resumed_run_keeps_verdicts_and_judges_the_rest_again(tmp_path: Path) -> None:
    rows = [{"tag": "l1_p1", "verdict": "pass"}, {"tag": "l1_p2", "verdict": "FAIL"},
            {"tag": "l1_p3", "verdict": "not judged"}]
    (tmp_path / "candidates.json").write_text(json.dumps({"meta": {}, "rows": rows}))
    assert [r["tag"] for r in _done_before(tmp_path)] == ["l1_p1", "l1_p2"]
    assert _done_before(tmp_path / "absent") == []


def test_an_official_run_resumed_keeps_judged_rows_and_judges_the_rest(tmp_path: Path) -> None:
    rows = [{"problem": "level1/1_a", "how": "whole", "status": "pass"},
            {"problem": "level1/2_b", "how": "not finished", "status": "not finished"},
            {"problem": "level1/3_c", "how": "sampled rows", "status": "pass"}]
    path = tmp_path / "official.json"
    path.write_text(json.dumps({"meta": {"commit": "abc"}, "rows": rows}))
    kept = resumed(path)
    assert sorted(kept) == ["level1/1_a", "level1/3_c"]
    assert kept["level1/3_c"]["resumed_from"] == "abc"
    assert resumed(tmp_path / "absent.json") == {} and resumed(None) == {}


def test_a_workers_host_peak_counts_what_a_judgement_held_since_the_reset() -> None:
    host_peak(reset=True)
    held = np.ones(1 << 25)  # 256 MiB, touched
    high = host_peak()
    del held
    if high is None:
        pytest.skip("this system does not report a process's peak resident size")
    host_peak(reset=True)
    after = host_peak()
    assert after is not None and high - after >= (1 << 28) * 0.9
