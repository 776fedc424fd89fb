"""The official run's admission by device memory, on fake devices and fake problems:
the memory model fitted to measured peaks, whole wherever the plan fits, big
problems first with small ones beside them, an out-of-memory judged again alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.kernelbench.admission import (
    GIB,
    Admission,
    MemoryModel,
    Planned,
    Room,
    constant_model,
    fit,
    kind_of,
    out_of_memory,
    simulate,
)
from benchmarks.kernelbench.official_table import over_limit, write_table


def _model(per_byte: float = 3.0) -> MemoryModel:
    return MemoryModel({"all": per_byte}, fixed=GIB, candidate=0.5)


def _row(name: str, kind: str, floor: float, peak: float, how: str = "whole",
         status: str = "pass") -> dict:
    return {"problem": name, "kind": kind, "floor_gib": floor, "peak_gib": peak, "how": how,
            "seconds": 5.0, "status": status}


def test_kinds_from_the_ops_a_forward_dispatches() -> None:
    assert kind_of(["aten::convolution", "relu"], transposed=True) == "transposed convolution"
    assert kind_of(["convolution", "add"]) == "convolution"
    assert kind_of(["max_pool2d_with_indices"]) == "pooling"
    assert kind_of(["mm", "gelu"]) == "matmul"
    assert kind_of(["relu"]) == "other"


def test_the_fit_takes_a_quantile_per_kind_and_keeps_measured_peaks() -> None:
    rows = [_row(f"level1/{i}_conv", "convolution", 1.0, 2.0 + i) for i in range(10)]
    rows += [_row("level1/20_mm", "matmul", 2.0, 4.0),  # too few matmuls: all rows' quantile
             _row("level1/21_relu", "other", 0.1, 9.0),  # below the least floor: no ratio
             _row("level1/22_pool", "pooling", 1.0, 30.0, how="sampled rows"),
             _row("level1/23_gemm", "matmul", 1.0, 90.0, status="fail"),  # stopped: no peak
             {**_row("level1/24_mm", "matmul", 1.0, 1.5), "live_gib": 1.2}]
    m = fit(rows, quantile=0.9, least=3)
    assert m.per_byte["convolution"] == 11.0  # the 0.9 quantile of 2..11
    # the matmuls' 2.0 and 1.5 (the reserved peak, not the 1.2 in use) beside the
    # ten: index 10 of the twelve sorted ratios
    assert "matmul" not in m.per_byte and m.per_byte["all"] == 10.0
    assert "level1/23_gemm" not in m.peaks and m.peaks["level1/24_mm"] == int(1.5 * GIB)
    # fitted to live peaks (for capped processes): rows without one are left out
    live = fit(rows, quantile=0.5, least=1, peak="live")
    assert live.per_byte == {"all": 1.2, "matmul": 1.2} and list(live.peaks) == ["level1/24_mm"]
    assert m.peaks["level1/21_relu"] == 9 * GIB and "level1/22_pool" not in m.peaks
    assert m.seconds["level1/22_pool"] == 5.0
    unstarted = fit([*rows, {**_row("level1/30_x", "other", 1.0, 1.0, how="not finished"),
                             "reason": "not started within the run's 520 s"}])
    assert "level1/30_x" not in unstarted.seconds  # no seconds: it did not run
    # a measured problem is planned at its own peak, an unmeasured one by its kind
    assert m.judge_bytes("level1/21_relu", "other", GIB // 10) == int(1.25 * 9 * GIB)
    assert m.judge_bytes("level9/new", "matmul", 2 * GIB) == 20 * GIB
    assert MemoryModel.load(_write(m)) == m
    with pytest.raises(ValueError, match="nothing to fit"):
        fit([_row("level1/1_x", "other", 1.0, 2.0, how="not finished")])


def _write(m: MemoryModel) -> Path:
    import tempfile  # noqa: PLC0415 - one file

    path = Path(tempfile.mkdtemp()) / "model.json"
    path.write_text(m.to_json())
    return path


def test_whole_wherever_the_plan_fits_the_device_at_all() -> None:
    adm = Admission(100 * GIB, _model(3.0))
    # 1 GiB fixed + 3.5 bytes per floor byte: 28 GiB of floor plan 99 GiB
    fits = adm.ticket(Planned("a", 28 * GIB))
    assert fits.whole and fits.reserve == 99 * GIB and fits.max_bytes == 28 * GIB
    over = adm.ticket(Planned("b", 29 * GIB))
    assert not over.whole and over.max_bytes < 29 * GIB and over.reserve <= 100 * GIB
    # the judge's share of a sampled one: what a third of the device holds
    assert over.max_bytes == int(100 * GIB // 3 / 3.0)
    # the constant model before any fit: the floor times the constant, nothing beside
    assert Admission(60 * GIB, constant_model(6)).ticket(Planned("c", 10 * GIB)).whole


def test_with_lean_a_problem_beyond_the_models_plan_is_tried_whole_at_the_lean_plan() -> None:
    adm = Admission(100 * GIB, _model(3.0), lean=1.5)
    # 1 GiB fixed + (0.5 + 1.5) bytes per floor byte: 40 GiB of floor reserve 81 GiB
    tried = adm.ticket(Planned("b", 40 * GIB))
    assert tried.whole and tried.reserve == 81 * GIB and tried.max_bytes == 40 * GIB
    assert adm.ticket(Planned("a", 28 * GIB)).reserve == 99 * GIB  # the model's plan fits
    assert not adm.ticket(Planned("c", 50 * GIB)).whole  # beyond the lean plan too
    measured = Admission(100 * GIB, MemoryModel({"all": 3.0}, fixed=GIB, candidate=0.5,
                                                peaks={"b": 120 * GIB}), lean=1.5)
    assert not measured.ticket(Planned("b", 40 * GIB)).whole  # its own peak says no
    assert not Admission(100 * GIB, _model(3.0)).ticket(Planned("b", 40 * GIB)).whole


def _overlaps(runs: list, a: str) -> set[str]:
    x = next(r for r in runs if r.name == a)
    return {r.name for r in runs if r.name != a and r.start < x.end and x.start < r.end}


def _peak_reserved(runs: list, reserve: dict[str, int]) -> int:
    times = {r.start for r in runs}
    return max(sum(reserve[r.name] for r in runs if r.start <= t < r.end) for t in times)


def test_a_big_problem_starts_first_and_small_ones_run_beside_it() -> None:
    adm = Admission(100 * GIB, _model(3.0))
    big = adm.ticket(Planned("big", 20 * GIB, work=1.0))  # 71 GiB planned
    small = [adm.ticket(Planned(f"s{i}", GIB, work=1e12)) for i in range(12)]  # 4.5 GiB
    reserve = {t.problem.name: t.reserve for t in [big, *small]}
    room = Room("gpu0", 100 * GIB, slots=8)
    runs = simulate(adm, [*small, big], [room], lambda t: 30.0 if t is big else 10.0)
    assert len(runs) == 13 and all(r.whole for r in runs)
    first = next(r for r in runs if r.name == "big")
    assert first.start == 0.0  # the most memory first, though it is the least work
    assert len(_overlaps(runs, "big")) >= 6  # small ones beside it, within the memory
    assert _peak_reserved(runs, reserve) <= 100 * GIB


def test_two_big_problems_run_one_after_the_other_with_small_ones_beside() -> None:
    adm = Admission(100 * GIB, _model(3.0), patience=5.0)
    a = adm.ticket(Planned("a", 14 * GIB))  # 50 GiB planned
    b = adm.ticket(Planned("b", 16 * GIB))  # 57 GiB: not beside a
    small = [adm.ticket(Planned(f"s{i}", 2 * GIB, work=float(i))) for i in range(40)]  # 8
    assert (a.reserve, b.reserve, small[0].reserve) == (50 * GIB, 57 * GIB, 8 * GIB)
    room = Room("gpu0", 100 * GIB, slots=8)
    runs = simulate(adm, [a, b, *small], [room], lambda t: 20.0 if t in (a, b) else 8.0)
    rb, ra = sorted((r for r in runs if r.name in "ab"), key=lambda r: r.start)
    # b first (the most memory); a starts as b ends
    assert (rb.name, rb.start) == ("b", 0.0) and ra.start == rb.end
    assert "b" not in _overlaps(runs, "a")
    assert _overlaps(runs, "a") and _overlaps(runs, "b")  # small ones beside both


@pytest.mark.parametrize("patience", [5.0, 1e9])
def test_a_problem_that_waits_past_patience_stops_the_queue_until_it_fits(
        patience: float) -> None:
    adm = Admission(100 * GIB, _model(3.0), patience=patience)
    # by the least work: six small ones (8 GiB each) before the big one (57 GiB), the
    # rest after it; they end at staggered times, so some always free a slot
    small = [adm.ticket(Planned(f"s{i}", 2 * GIB, work=float(i if i < 6 else i + 1)))
             for i in range(40)]
    big = adm.ticket(Planned("big", 16 * GIB, work=6.5))
    room = Room("gpu0", 100 * GIB, slots=8)
    runs = simulate(adm, [big, *small], [room], lambda t: 20.0 if t is big else
                    3.0 + int(t.problem.name[1:]) % 7, order="least-work-first")
    start = next(r for r in runs if r.name == "big").start
    if patience < 100:  # the queue stops behind it at 5 s; it starts as the device drains
        assert 5.0 <= start <= 10.0 and _overlaps(runs, "big")
    else:  # never stopping for it: small ones behind it take the memory it needs
        assert start > 20.0


def test_slots_bound_the_problems_at_once() -> None:
    adm = Admission(100 * GIB, _model(1.0))
    ts = [adm.ticket(Planned(f"s{i}", GIB // 4)) for i in range(9)]
    runs = simulate(adm, ts, [Room("gpu0", 100 * GIB, slots=3)], lambda t: 4.0)
    assert max(len(_overlaps(runs, r.name)) for r in runs) == 2
    assert max(r.end for r in runs) == 12.0


def test_out_of_memory_beside_others_is_judged_again_whole_and_alone() -> None:
    adm = Admission(100 * GIB, _model(2.0))
    x = adm.ticket(Planned("x", 4 * GIB, work=1e12))
    others = [adm.ticket(Planned(f"s{i}", 2 * GIB, work=float(i))) for i in range(30)]
    room = Room("gpu0", 100 * GIB, slots=8)
    runs = simulate(adm, [x, *others], [room],
                    lambda t: 10.0 if t is x else 3.0 + int(t.problem.name[1:]) % 7,
                    ooms=lambda t, r: t is x and len(r.running) > 1)
    rx = [r for r in runs if r.name == "x"]
    assert len(rx) == 1 and rx[0].retried and rx[0].alone and rx[0].whole
    assert _overlaps(runs, "x") == set()  # nothing beside it the second time
    # at the queue's head from its first end (10 s): nothing else started until the
    # device was free and it had run
    assert not [r for r in runs if 10.0 < r.start < rx[0].end and r.name != "x"]
    # judged alone, an out-of-memory is not queued again (the judge falls back itself)
    assert not adm.again(x, {"status": "not judged", "reason": "out of memory"})


def test_which_rows_say_out_of_memory() -> None:
    assert out_of_memory({"status": "not judged",
                          "reason": "not judged: the oracle ran out of device memory in "
                                    "float64 (CUDA out of memory)"})
    assert out_of_memory({"status": "not judged", "reason": "CUDA error: out of memory"})
    assert not out_of_memory({"status": "fail", "reason": "out of memory"})
    assert not out_of_memory({"status": "not judged", "reason": "a package is missing"})
    assert out_of_memory({"status": "fail", "reason": "the candidate's process did not "
                                                      "start: it exited with code 1"})


def test_the_table_gives_the_whole_share_over_every_problem_and_the_slow_ones(
        tmp_path: Path) -> None:
    rows = [{"problem": "level1/1_a", "how": "whole", "status": "pass", "seconds": 5.0},
            {"problem": "level1/2_b", "how": "whole", "status": "pass", "seconds": 90.0,
             "wall_s": 130.0, "retried": True},
            {"problem": "level2/1_c", "how": "not finished", "status": "not finished",
             "seconds": 121.0, "reason": "killed past the limit of 120 s"},
            {"problem": "level2/2_d", "how": "sampled rows", "status": "pass",
             "seconds": 30.0, "timings": {"oracle": 20.0, "capture": 4.0,
                                          "candidate start: imports": 1.0}},
            {"problem": "level2/3_e", "how": "whole", "status": "pass", "seconds": 9.0,
             "timings": {"oracle": 3.0, "capture": 5.0}}]
    assert [r["problem"] for r in over_limit(rows, 120.0)] == ["level1/2_b", "level2/1_c"]
    head = {"command": "c", "commit": "x", "date": "d", "device_name": "fake", "torch": "t",
            "devices": 1, "memory_gib": 100, "slots": 4, "examples": 0, "limit": 120.0,
            "seconds": 200.0, "memory_model": "m", "order": "big-first"}
    write_table(tmp_path, head, rows)
    text = (tmp_path / "official.md").read_text()
    assert "Judged whole: 3 of 5 (60%)" in text and "Over 120 s: 2" in text
    assert "- level1/2_b: 130 s, whole" in text
    assert "| oracle | 23 | level2/2_d (20.0) |" in text  # the phases, the most first
    assert "| capture | 9 | level2/3_e (5.0) |" in text and "imports" not in text


def test_the_queue_does_not_stop_for_a_head_that_problems_ahead_of_it_keep_out() -> None:
    adm = Admission(100 * GIB, _model(3.0), patience=5.0)
    a = adm.ticket(Planned("a", 25 * GIB))  # 89 GiB planned, ahead of b
    b = adm.ticket(Planned("b", 24 * GIB))  # 85.5 GiB: waits for a alone, not for the rest
    small = [adm.ticket(Planned(f"s{i}", GIB // 2, work=float(i))) for i in range(30)]
    room = Room("gpu0", 100 * GIB, slots=4)
    runs = simulate(adm, [a, b, *small], [room], lambda t: 40.0 if t in (a, b) else 4.0)
    # small ones keep running beside a the whole 40 s: stopping them would not let b in
    assert sum(1 for r in runs if r.name.startswith("s") and r.end <= 40.0) >= 20
