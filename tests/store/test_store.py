"""The regression store: one versioned folder, one repro per failure signature,
replayed before new cases are drawn; replay --all, store list and prune."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from numoracle import KernelMismatch, check_kernel
from numoracle.api import _make_target
from numoracle.cases.case import Case
from numoracle.checking.check import check_case
from numoracle.checking.replay import prune, replay, replay_for_target
from numoracle.cli import main
from numoracle.errors import InvalidArgument
from numoracle.store.repro import load_repro, save_repro
from numoracle.store.store import (
    FORMAT_FILE,
    FORMAT_VERSION,
    diagnosis_class,
    entries,
    signature,
)


def bias_twice(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A linear layer that adds its bias twice."""
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + 2 * bias
        out["grad_bias"] = grad_output.sum(axis=0)
    return {"y": y, **out}


def good(x: Any, weight: Any, grad_output: Any, bias: Any = None) -> dict[str, Any]:
    """A correct linear layer."""
    y = x @ weight.T
    out = {"grad_input": grad_output @ weight, "grad_weight": grad_output.T @ x}
    if bias is not None:
        y = y + bias
        out["grad_bias"] = grad_output.sum(axis=0)
    return {"y": y, **out}


CASE = Case("linear", {"batch": 2, "in_features": 3, "out_features": 2, "bias": True},
            family="exact", seed=1)


def failing_verdict(fn: Any = bias_twice, name: str = "bias_twice", case: Case = CASE) -> Any:
    target = _make_target(fn, op="linear", name=name)
    v = check_case(case, target)
    assert not v.passed
    return v, target


def test_one_folder_per_signature_with_a_format_file(tmp_path: Path) -> None:
    v, target = failing_verdict()
    first = save_repro(v, target, store=tmp_path)
    # another case of the same shapes and the same bug: the same signature, kept once
    other = Case(CASE.op, CASE.params, family="exact", seed=2)
    v2, _ = failing_verdict(case=other)
    assert signature(v2) == signature(v)
    assert save_repro(v2, target, store=tmp_path) == first
    assert json.loads((tmp_path / FORMAT_FILE).read_text()) == {"format": FORMAT_VERSION}
    # other shapes: another signature, another folder
    bigger = Case("linear", {"batch": 3, "in_features": 3, "out_features": 2, "bias": True},
                  family="exact", seed=1)
    v3, _ = failing_verdict(case=bigger)
    assert save_repro(v3, target, store=tmp_path) != first
    found = entries(tmp_path)
    assert len(found) == 2 and {e.signature["diagnosis"] for e in found} == {"logic"}
    assert all(e.signature["outputs"] == ["y"] for e in found)
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_newer_store_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / FORMAT_FILE).write_text(json.dumps({"format": FORMAT_VERSION + 1}))
    v, target = failing_verdict()
    with pytest.raises(InvalidArgument, match="newer than this numoracle"):
        save_repro(v, target, store=tmp_path)


def test_a_folder_of_the_old_layout_stays_readable(tmp_path: Path) -> None:
    v, target = failing_verdict()
    folder = save_repro(v, target, store=tmp_path / "new")
    old = tmp_path / "old" / "bias_twice-linear-0123456789"  # the case-digest name of before
    shutil.copytree(folder, old)
    meta = json.loads((old / "repro.json").read_text())
    for key in ("format", "signature", "inputs", "saved"):  # what format 0 did not write
        meta.pop(key)
    (old / "repro.json").write_text(json.dumps(meta))
    (e,) = entries(tmp_path / "old")
    assert e.format == 0 and e.signature == signature(v)
    assert not replay(old).passed


@pytest.mark.parametrize(("text", "error", "cls"), [
    ("exceeds every precision model: a logic bug", None, "logic"),
    ("exceeds fp32; consistent with tf32 (fp32 storage, ...)", None, "precision:tf32"),
    ("NaN where the reference is not NaN at 1 element(s)", None, "nonfinite"),
    ("", "the kernel raised ValueError: boom", "error:raised ValueError"),
    ("", "output 'y': expected shape (2,), got (1,)", "error:shape"),
])
def test_diagnosis_classes(text: str, error: str | None, cls: str) -> None:
    assert diagnosis_class(text, error) == cls


def test_a_check_replays_its_stored_repros_first(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(KernelMismatch):
        check_kernel(bias_twice, op="linear", examples=30, store=store, name="layer")
    (e,) = entries(store)
    # the same kernel fails on its stored repro before any case is drawn
    with pytest.raises(KernelMismatch, match="a stored repro of this kernel: it still fails"):
        check_kernel(bias_twice, op="linear", examples=1, store=store, name="layer")
    # fixed: the stored repro passes now, and the result says so
    result = check_kernel(good, op="linear", examples=5, store=store, name="layer")
    assert result.replayed == 1 and result.fixed == [str(e.path)]
    assert entries(store)[0].status == "fixed"
    # another claim of the same name is not replayed against this one's repro
    target = _make_target(good, op="linear", name="layer", precision="tf32")
    assert replay_for_target(target, store) == ([], [])


def test_replay_all_list_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    store = tmp_path / "store"
    v, target = failing_verdict()
    save_repro(v, target, store=store)
    v2, target2 = failing_verdict(name="other_layer")
    save_repro(v2, target2, store=store)
    # the kernels live in this test module: replay judges their recorded outputs
    assert main(["replay", "--all", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert "2 repro(s)" in out and "2 still fail, 0 fixed" in out
    assert main(["store", "list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "bias_twice" in out and "other_layer" in out and "logic" in out
    assert all(len(line) <= 100 for line in out.splitlines() if "│" in line or "┃" in line)
    assert main(["store", "prune", "--store", str(store)]) == 2
    assert "needs --fixed" in capsys.readouterr().err
    assert main(["store", "prune", "--fixed", "--store", str(store)]) == 0
    assert len(entries(store)) == 2  # both still fail: nothing pruned
    assert main(["store", "prune", "--targets", "other_layer", "--store", str(store)]) == 0
    assert [e.target for e in entries(store)] == ["bias_twice"]
    assert main(["replay", "--store", str(store)]) == 2  # neither PATH nor --all


def test_prune_fixed_removes_what_passes_now(tmp_path: Path) -> None:
    store = tmp_path / "store"
    v, target = failing_verdict(name="layer")
    folder = save_repro(v, target, store=store)
    assert prune(store, fixed=True, replay_now=False) == []  # never replayed: not fixed
    good_target = _make_target(good, op="linear", name="layer")
    assert replay_for_target(good_target, store)[1][0].path == folder  # recorded as fixed
    assert [e.path for e in prune(store, fixed=True, replay_now=False)] == [folder]
    assert entries(store) == []
    assert not folder.exists()


def test_repro_with_given_inputs_replays_them(tmp_path: Path) -> None:
    target = _make_target(bias_twice, op="linear", name="bias_twice")
    inputs = {k: np.full_like(v, 0.5) for k, v in CASE.inputs().items()}
    v = check_case(CASE, target, inputs=inputs)
    folder = save_repro(v, target, store=tmp_path, inputs=inputs)
    r = load_repro(folder)
    assert r.stored_inputs and np.array_equal(r.inputs["x"], inputs["x"])
    again = check_case(r.case, target, inputs=r.inputs)
    assert not again.passed and again.got is not None
    assert np.array_equal(again.got["y"], v.got["y"])


def test_a_repro_without_its_arrays_replays_from_its_seed(tmp_path: Path) -> None:
    """A repro folder copied without arrays.npz (too large to keep, say): a seeded
    case draws its inputs again; one whose inputs came from outside says so."""
    v, target = failing_verdict()
    folder = save_repro(v, target, store=tmp_path / "seeded")
    (folder / "arrays.npz").unlink()
    r = load_repro(folder)
    assert r.got == {} and np.array_equal(r.inputs["x"], CASE.inputs()["x"])
    assert not check_case(r.case, target).passed  # the kernel, run again, still fails

    inputs = {k: np.full_like(a, 0.5) for k, a in CASE.inputs().items()}
    given = save_repro(check_case(CASE, target, inputs=inputs), target,
                       store=tmp_path / "given", inputs=inputs)
    (given / "arrays.npz").unlink()
    with pytest.raises(InvalidArgument, match="came from outside"):
        load_repro(given)
