"""Repros: a failing case saved small and self-contained, replayed by one command.

A repro is a folder holding ``repro.json`` (the case, the target and how to
find it again, the verdict in brief), ``arrays.npz`` (the inputs and the
outputs the kernel returned) and ``replay.py``, a script that runs
``numoracle replay`` on its own folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.case import Case
from ..cases.target import Target
from ..checking.verdict import Verdict
from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model

__all__ = ["save_repro", "load_repro", "replay", "resolve_target", "Repro", "DEFAULT_STORE"]

#: where repros are kept unless told otherwise
DEFAULT_STORE = Path(".numoracle") / "repros"

@dataclass
class Repro:
    """A loaded repro."""

    path: Path
    case: Case
    target_name: str
    op: str
    model: PrecisionModel
    source: str | None
    inputs: dict[str, np.ndarray]
    got: dict[str, np.ndarray]
    summary: dict[str, Any]
    #: the inputs are the stored arrays (a case supplied from outside), not the seed's
    stored_inputs: bool = False


def save_repro(verdict: Verdict, target: Target, *, store: Path | str = DEFAULT_STORE,
               inputs: dict[str, np.ndarray] | None = None) -> Path:
    """Save ``verdict``'s case as a repro folder in the store ``store``
    (:mod:`numoracle.store.store`: one folder per failure signature, written
    atomically); returns the folder. ``inputs``: the arrays of a case supplied
    from outside, which replay then uses instead of the case's seed."""
    from .store import write_repro  # noqa: PLC0415 - store imports this module's peers

    folder = write_repro(verdict, target, store, inputs)
    verdict.repro = str(folder)
    return folder


def load_repro(path: Path | str) -> Repro:
    """Read a repro folder (or its ``repro.json``)."""
    p = Path(path)
    folder = p.parent if p.name == "repro.json" else p
    meta_file = folder / "repro.json"
    if not meta_file.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a repro: no repro.json in {folder}; "
                              "give the folder a failing run printed")
    meta = json.loads(meta_file.read_text())
    if "op_spec" in meta:  # an op made from a reference at run time: made again
        from ..oracle.traced.op import restore_op  # noqa: PLC0415 - torch only for such ops

        restore_op(meta["op_spec"])
    case = Case.from_dict(meta["case"])
    stored_inputs = meta.get("inputs") == "arrays"
    arrays = folder / "arrays.npz"
    if arrays.is_file():
        with np.load(arrays) as z:
            inputs = {k[6:]: z[k] for k in z.files if k.startswith("input_")}
            got = {k[4:]: z[k] for k in z.files if k.startswith("got_")}
    elif stored_inputs:
        raise InvalidArgument(f"{folder} has no arrays.npz: this case's inputs came from "
                              "outside and are kept only there; restore the file to replay it")
    else:  # the inputs come from the case's seed; the recorded outputs are gone
        inputs, got = case.inputs(), {}
    t = meta["target"]
    model = PrecisionModel.from_dict(t["model"]) if "model" in t else get_model(t["precision"])
    return Repro(folder, case, t["name"], t["op"], model, t.get("source"), inputs, got,
                 meta.get("verdict", {}), stored_inputs)


def _load_module(ref: str) -> Any:
    if ref.endswith(".py"):
        path = Path(ref)
        if not path.is_file():
            raise InvalidArgument(f"target source file {ref!r} does not exist here; run "
                                  "from the folder it is relative to")
        spec = importlib.util.spec_from_file_location(f"numoracle_src_{path.stem}", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(ref)


def resolve_target(name: str, op: str, source: str | None = None) -> Target:
    """Find a target again: in ``source`` (a module or ``.py`` file with a
    ``TARGETS`` list) when given, else among the built-in targets."""
    if source:
        mod = _load_module(source)
        for t in getattr(mod, "TARGETS", ()):
            if t.name == name and t.op == op:
                return t
        raise InvalidArgument(f"{source!r} has no target {name!r} for op {op!r} in its TARGETS")
    from ..kernels import get_target  # noqa: PLC0415 - kernels are optional at import

    return get_target(name, op)


def replay(path: Path | str, *, rerun: bool = True) -> Verdict:
    """Re-run a repro: the target again when it can be found (``rerun``), else
    the recorded outputs are judged again."""
    from ..checking.check import check_case, judge  # noqa: PLC0415 - check imports repro's peers

    r = load_repro(path)
    target = None
    if rerun:
        try:
            target = resolve_target(r.target_name, r.op, r.source)
        except InvalidArgument:
            target = None
    if target is not None and target.unavailable_reason() is None:
        v = check_case(r.case, target, with_diagnosis=True,
                       inputs=r.inputs if r.stored_inputs else None)
    else:
        outs = judge(r.case, r.model, r.inputs, r.got, with_diagnosis=True)
        v = Verdict(case=r.case, target=r.target_name + " (recorded outputs)", op=r.op,
                    precision=r.model.name, passed=all(o.passed for o in outs.values()),
                    outputs=outs, error=None if r.got else r.summary.get("error"))
        if not r.got:
            v.passed = False
    v.repro = str(r.path)
    return v
