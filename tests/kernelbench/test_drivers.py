"""The survey drivers' bookkeeping: the official run's plans, resumption and loop (with
judging workers that answer at once), the leaderboard run's resumption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kernelbench.leaderboard import _done_before
from benchmarks.kernelbench.official import kept_smaller, over_limit, plan_problem, resumed

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
            {"problem": "level1/3_c", "how": "sampled rows", "status": "pass"},
            {"problem": "level2/12_d", "how": "whole", "status": "fail",
             "reason": "the candidate raised OutOfMemoryError: CUDA out of memory."},
            {"problem": "level1/7_e", "how": "refused", "status": "not judged",
             "reason": "the judge's process ended with code -9 and no row: ..."}]
    path = tmp_path / "official.json"
    path.write_text(json.dumps({"meta": {"commit": "abc"}, "rows": rows}))
    kept = resumed(path)
    assert sorted(kept) == ["level1/1_a", "level1/3_c"]
    assert kept["level1/3_c"]["resumed_from"] == "abc"
    assert resumed(tmp_path / "absent.json") == {} and resumed(None) == {}


def test_a_row_killed_past_the_limit_is_kept_only_when_asked(tmp_path: Path) -> None:
    rows = [{"problem": "level2/72_a", "how": "not finished", "status": "not finished",
             "reason": "killed past the limit of 120 s"},
            {"problem": "level2/50_b", "how": "not finished", "status": "not finished",
             "reason": "stopped at the run's end (370 s) after 104 s"},
            {"problem": "level1/9_c", "how": "not finished", "status": "not finished",
             "reason": "not started"}]
    path = tmp_path / "official.json"
    path.write_text(json.dumps({"meta": {"commit": "abc"}, "rows": rows}))
    assert resumed(path) == {}
    kept = resumed(path, keep_over_limit=True)
    assert sorted(kept) == ["level2/72_a"] and over_limit(kept["level2/72_a"])
    assert not over_limit(rows[1]) and not over_limit(rows[2])


def test_a_row_judged_smaller_alone_is_kept_and_one_judged_smaller_beside_others_is_not() -> None:
    alone = {"problem": "level1/42_a", "how": "reduced sizes", "status": "pass", "retried": True}
    beside = {"problem": "level1/43_b", "how": "reduced sizes", "status": "pass"}
    assert kept_smaller(alone, whole=True)  # the device to itself gave this answer
    assert not kept_smaller(beside, whole=True)  # its plan fits whole: judged again
    assert kept_smaller(beside, whole=False)  # its plan still does not fit whole


_PEAK_SCRIPT = """
import json, sys
import numpy as np
from benchmarks.kernelbench.worker import host_peak
host_peak(reset=True)
held = np.ones(1 << 25)  # 256 MiB, touched
high = host_peak()
del held
host_peak(reset=True)
print(json.dumps([high, host_peak()]))
"""


def test_a_workers_host_peak_counts_what_a_judgement_held_since_the_reset() -> None:
    """In a fresh process (a test process's history, such as a Landlock ruleset a
    sandbox test leaves on it or memory it keeps resident, is not the worker's):
    256 MiB held raises the peak, and the reset drops it again."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    high, after = json.loads(done.stdout.strip().splitlines()[-1])
    if high is None:
        pytest.skip("this system does not report a process's peak resident size")
    assert after is not None and high - after >= (1 << 28) * 0.9, (high, after)


_FAKE_WORKER = r'''
import json, os, sys, time
for line in sys.stdin:
    job = json.loads(line)
    oom = "oom" in job["problem"] and not job["fall_back"]
    row = {"status": "not judged" if oom else "pass", "how": "refused" if oom else "whole",
           "seconds": 0.2, "notes": [], "fall_back": job["fall_back"],
           "reason": "not judged: the oracle ran out of device memory" if oom else "ok"}
    time.sleep(0.2)
    with open(job["out"] + ".part", "w") as f:
        f.write(json.dumps(row))
    os.replace(job["out"] + ".part", job["out"])  # whole or not at all, as the worker's
'''


def test_the_official_driver_admits_by_memory_and_judges_an_out_of_memory_again_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's loop with judging workers that answer at once (no torch): a fake
    device of 10 GiB, a problem that runs out of memory unless alone."""
    import argparse  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import time  # noqa: PLC0415
    from dataclasses import fields  # noqa: PLC0415

    from benchmarks.kernelbench import official  # noqa: PLC0415
    from benchmarks.kernelbench.admission import (  # noqa: PLC0415
        GIB,
        Admission,
        MemoryModel,
        Planned,
        Ticket,
    )

    def fake_worker(d: official._Device, tmp: Path, env: dict) -> official._Worker:
        proc = subprocess.Popen([sys.executable, "-c", _FAKE_WORKER], stdin=subprocess.PIPE,
                                start_new_session=True)
        worker = official._Worker(proc, tmp / "log")
        d.workers.append(worker)
        return worker

    monkeypatch.setattr(official, "_start_worker", fake_worker)
    admission = Admission(10 * GIB, MemoryModel({"all": 1.0}, fixed=0, candidate=0.0))
    jobs = []
    for name, floor in [("level1/1_big", 6), ("level1/2_oom", 3), ("level1/3_a", 2),
                        ("level1/4_b", 2), ("level1/5_c", 1)]:
        t = admission.ticket(Planned(name, floor * GIB))
        jobs.append(official._Job(**{f.name: getattr(t, f.name) for f in fields(Ticket)},
                                  plan={"path": name}))
    pending = admission.order(jobs)
    device = official._Device("cuda:0", 10 * GIB, 3)
    args = argparse.Namespace(out=tmp_path, limit=30.0, deadline=60.0, examples=0)
    head = {"command": "c", "commit": "x", "date": "d", "device_name": "fake", "torch": "t",
            "devices": 1, "memory_gib": 10, "slots": 3, "examples": 0, "limit": 30.0}
    rows: list = []
    try:
        official._loop(args, time.perf_counter(), [device], pending, rows, head, tmp_path,
                       {}, admission, 1 << 40)
    finally:
        for w in device.workers:
            official._kill(w)
    got = {r["problem"]: r for r in rows}
    assert len(rows) == 5 and device.used == 0 and not device.running
    assert got["level1/2_oom"]["retried"] and got["level1/2_oom"]["fall_back"]  # alone
    assert got["level1/2_oom"]["wall_s"] >= 0.4  # both attempts counted
    assert all(r["how"] == "whole" for r in rows)
    assert "Judged whole: 5 of 5 (100%)" in (tmp_path / "official.md").read_text()


def test_the_warm_up_problem_is_judged_whole_and_passes(tmp_path: Path) -> None:
    """What a judging worker judges on the GPU before its first problem (to compile the
    kernels a judgement uses) is a problem the judge takes whole: on the CPU here, its
    own Model within the claim, so the warm-up runs every phase a judgement has."""
    from benchmarks.kernelbench.worker import WARM_PROBLEM, judge_one  # noqa: PLC0415

    problem = tmp_path / "warm_problem.py"
    problem.write_text(WARM_PROBLEM)
    row = judge_one(problem, tmp_path / "row.json", device="cpu", max_bytes=None,
                    examples=0, limit=60.0)
    assert (row["status"], row["how"]) == ("pass", "whole")
    assert {"torch reference", "candidate runs", "capture", "oracle", "comparison"} <= \
        set(row["timings"])


def test_the_warm_up_compares_in_pieces_in_the_gpus_namespace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up's comparison takes the piecewise path (its kernels are those a large
    output compiles): here in NumPy standing for the GPU's namespace."""
    import numpy as np  # noqa: PLC0415

    from benchmarks.kernelbench import worker  # noqa: PLC0415
    from numoracle.checking import verdict  # noqa: PLC0415
    from numoracle.oracle import xp  # noqa: PLC0415

    seen = []
    pieces = verdict._compare_in_pieces
    monkeypatch.setattr(xp, "gpu_namespace", lambda: np)
    monkeypatch.setattr(verdict, "_compare_in_pieces",
                        lambda *a, **k: seen.append(a[0]) or pieces(*a, **k))
    worker._compare_in_pieces_once()
    assert seen == ["warm"]
    assert verdict.COMPARE_PIECE == 1 << 24  # put back


def test_a_jobs_time_counts_from_when_its_worker_began_it(tmp_path: Path) -> None:
    """A worker busy warming up has not begun the job handed to it: the time limit
    counts from the ``.began`` file it writes as it takes the job."""
    import time  # noqa: PLC0415

    from benchmarks.kernelbench import official  # noqa: PLC0415
    from benchmarks.kernelbench.admission import Planned  # noqa: PLC0415

    job = official._Job(Planned("a", 1), True, 1, 1, plan={"path": "a"},
                        out=tmp_path / "a_0.json")
    job.started = time.perf_counter() - 100.0  # handed over 100 s ago
    assert official._spent(job) >= 100.0 and job.began is None
    (tmp_path / "a_0.json.began").touch()
    assert official._spent(job) < 1.0 and job.began is not None


def test_workers_warm_up_after_the_first_is_done(tmp_path: Path) -> None:
    """The first worker warms up alone; one that comes while it does waits for it."""
    import fcntl  # noqa: PLC0415
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    from benchmarks.kernelbench.worker import warm_after_first  # noqa: PLC0415

    lock = str(tmp_path / "warm.lock")
    done: list[float] = []
    with open(lock, "a") as held:  # a first worker, warming up
        fcntl.flock(held, fcntl.LOCK_EX)
        later = threading.Thread(target=lambda: done.append(
            warm_after_first(lambda: done.append(time.perf_counter()), lock)))
        later.start()
        time.sleep(0.3)
        assert done == []  # waiting for the first
        released = time.perf_counter()
        fcntl.flock(held, fcntl.LOCK_UN)
        later.join(10)
    assert done[1] is False and done[0] >= released
    assert warm_after_first(lambda: None, lock) is True  # none warming: the first
    assert warm_after_first(lambda: None, None) is True
