"""Repros: a failing case saved small and self-contained, replayed by one command.

A repro is a folder holding ``repro.json`` (the case, the target and how to
find it again, the verdict in brief), ``arrays.npz`` (the inputs and the
outputs the kernel returned) and ``replay.py``, a script that runs
``numoracle replay`` on its own folder.
"""

from __future__ import annotations

import hashlib
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

_REPLAY_PY = '''#!/usr/bin/env python
"""Replays this numoracle repro: {describe}"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
'''


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


def _folder_name(verdict: Verdict) -> str:
    key = json.dumps([verdict.case.to_dict(), verdict.target, verdict.op], sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in verdict.target)
    return f"{safe}-{verdict.op}-{digest}"


def save_repro(verdict: Verdict, target: Target, *, store: Path | str = DEFAULT_STORE) -> Path:
    """Save ``verdict``'s case as a repro folder under ``store``; returns the folder."""
    case: Case = verdict.case
    folder = Path(store) / _folder_name(verdict)
    folder.mkdir(parents=True, exist_ok=True)
    inputs = case.inputs()
    # Any: savez_compressed types **kwds as if they could fill its allow_pickle: bool
    arrays: dict[str, Any] = {f"input_{k}": v for k, v in inputs.items()}
    arrays.update({f"got_{k}": v for k, v in (verdict.got or {}).items()})
    np.savez_compressed(folder / "arrays.npz", **arrays)
    meta = {
        "case": case.to_dict(),
        "target": {"name": target.name, "op": target.op, "precision": target.precision.name,
                   "model": target.precision.to_dict(), "source": target.source},
        "verdict": {"passed": verdict.passed, "worst_ratio": _num(verdict.worst_ratio),
                    "diagnosis": verdict.diagnosis, "error": verdict.error},
        "describe": case.describe(),
    }
    (folder / "repro.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (folder / "replay.py").write_text(_REPLAY_PY.format(describe=case.describe()))
    verdict.repro = str(folder)
    return folder


def _num(x: float) -> float | str:
    return x if np.isfinite(x) else repr(float(x))


def load_repro(path: Path | str) -> Repro:
    """Read a repro folder (or its ``repro.json``)."""
    p = Path(path)
    folder = p.parent if p.name == "repro.json" else p
    meta_file = folder / "repro.json"
    if not meta_file.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a repro: no repro.json in {folder}; "
                              "give the folder a failing run printed")
    meta = json.loads(meta_file.read_text())
    with np.load(folder / "arrays.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input_")}
        got = {k[4:]: z[k] for k in z.files if k.startswith("got_")}
    t = meta["target"]
    model = PrecisionModel.from_dict(t["model"]) if "model" in t else get_model(t["precision"])
    return Repro(folder, Case.from_dict(meta["case"]), t["name"], t["op"], model,
                 t.get("source"), inputs, got, meta.get("verdict", {}))


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
        v = check_case(r.case, target, with_diagnosis=True)
    else:
        outs = judge(r.case, r.model, r.inputs, r.got, with_diagnosis=True)
        v = Verdict(case=r.case, target=r.target_name + " (recorded outputs)", op=r.op,
                    precision=r.model.name, passed=all(o.passed for o in outs.values()),
                    outputs=outs, error=None if r.got else r.summary.get("error"))
        if not r.got:
            v.passed = False
    v.repro = str(r.path)
    return v
