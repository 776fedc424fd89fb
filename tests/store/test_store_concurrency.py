"""Concurrent writers never corrupt the store: processes saving overlapping and
distinct signatures at once, one of them killed while it writes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from numoracle.api import _make_target
from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.store.repro import load_repro, save_repro
from numoracle.store.store import entries, prune


def bias_twice(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A linear layer that adds its bias twice."""
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + 2 * bias
        out["grad_bias"] = grad_output.sum(axis=0)
    return {"y": y, **out}


def _case(batch: int) -> Case:
    return Case("linear", {"batch": batch, "in_features": 2, "out_features": 2, "bias": True},
                family="exact", seed=batch)


def _writer(store: str, batches: list[int], names: list[str], forever: bool) -> None:
    """Save the failure of every (name, batch); loop without end when ``forever``."""
    while True:
        for name in names:
            target = _make_target(bias_twice, op="linear", name=name)
            for b in batches:
                save_repro(check_case(_case(b), target), target, store=store)
        if not forever:
            return


def test_concurrent_writers_and_a_killed_one(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ctx = mp.get_context("spawn")
    names = ["k0", "k1"]
    batches = [1, 2, 3, 4]
    writers = [ctx.Process(target=_writer, args=(store, batches, names, False))
               for _ in range(3)]  # the same 8 signatures from three processes at once
    killed = ctx.Process(target=_writer, args=(store, list(range(5, 40)), ["victim"], True))
    for p in [*writers, killed]:
        p.start()
    deadline = time.monotonic() + 300  # until the victim has written (spawn is slow when busy)
    while not any(Path(store).glob("victim-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any(Path(store).glob("victim-*")), "the victim wrote nothing in 300 s"
    assert killed.pid is not None
    os.kill(killed.pid, signal.SIGKILL)  # wherever it is: mid-write or between writes
    for p in [*writers, killed]:
        p.join(120)
    assert all(p.exitcode == 0 for p in writers)
    found = entries(store)
    mine = {(e.target, e.signature["shapes"]["x"][0]) for e in found if e.target != "victim"}
    assert mine == {(n, b) for n in names for b in batches}  # none lost, none twice
    for e in found:  # every folder complete and loadable, its repro failing again
        r = load_repro(e.path)
        assert set(r.inputs) == {"x", "weight", "grad_output", "bias"}
        assert np.array_equal(r.inputs["x"], _case(r.case.params["batch"]).inputs()["x"])
        target = _make_target(bias_twice, op="linear", name=e.target)
        assert not check_case(r.case, target).passed
    # a killed writer leaves at most a temporary folder, which readers skip and prune clears
    left = list(Path(store).glob(".tmp-*"))
    assert len(left) <= 1
    for t in left:
        os.utime(t, (0, 0))
    prune(store, targets=["nobody"])
    assert not list(Path(store).glob(".tmp-*"))
