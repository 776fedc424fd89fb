"""The regression store: every repro a run saves, in one versioned folder,
one folder per failure signature.

Layout (format 1)::

    .numoracle/repros/
        numoracle-store.json            {"format": 1}
        <target>-<op>-<signature>/      a repro folder (repro.json, arrays.npz, replay.py)
            status.json                 the last replay: "fails" or "fixed", and when

A failure's **signature** is (target, op, failing outputs, diagnosis class,
shrunk shapes, and for a kernel handed in as a function its identity:
:func:`kernel_record`): the same bug found again by another run, another
xdist worker or another test lands on the same folder and is kept once, and
two kernels of one name in different modules are two.

Concurrent writers never corrupt the store, without a lock: a repro is
written whole into a private temporary folder (``.tmp-*``) and moved into
place with one ``os.rename``, which is atomic; when two writers race on one
signature, the second rename fails and its copy is dropped. Small files
(``status.json``, the format file) are written to a temporary file and moved
with ``os.replace``. A writer killed mid-write leaves only a ``.tmp-*``
folder, which readers skip and ``prune`` removes. Folders written before the
store had a format (named by the case rather than the signature) stay
readable: their signature is computed from their ``repro.json``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..callables import default_name, identity, locate, unlocated_reason
from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ..targets.target import Target
    from ..checking.verdict import Verdict

__all__ = ["FORMAT_VERSION", "FORMAT_FILE", "Entry", "signature", "diagnosis_class",
           "write_repro", "kernel_record", "entries", "record_status", "prune", "check_store",
           "atomic_write_text"]

#: the store format this version writes (and the newest it reads)
FORMAT_VERSION = 1
#: the file naming the format, at the top of the store
FORMAT_FILE = "numoracle-store.json"
#: a temporary folder older than this (seconds) is a killed writer's, and prune removes it
STALE_TMP_S = 600.0


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``:
    a reader sees the old content or the new, never a part."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def diagnosis_class(text: str, error: str | None = None) -> str:
    """The class of a diagnosis read from its sentence: ``logic``,
    ``precision:<model>``, ``nonfinite``, or ``error:<kind>`` for a kernel that
    raised, hung or returned the wrong thing. Only for repro folders written
    before signatures were stored; a verdict's class is read from its structured
    diagnoses (:attr:`~numoracle.checking.verdict.Verdict.failure_class`)."""
    if error:
        raised = re.search(r"raised (\w+)", error)
        if raised:
            return f"error:raised {raised.group(1)}"
        for word in ("hung", "did not return", "shape", "dtype", "device", "NaN"):
            if word in error:
                return f"error:{word}"
        return "error"
    found = re.search(r"consistent with ([\w.-]+)", text)
    if found and not text.startswith("within"):
        return f"precision:{found.group(1)}"
    if "logic bug" in text:
        return "logic"
    if "NaN" in text or "Inf" in text or "non-finite" in text:
        return "nonfinite"
    if text.startswith("within"):
        return "pass"
    return "other"


def signature(verdict: Verdict) -> dict[str, Any]:
    """The failure signature of a failing verdict: target, op, the failing
    outputs, the class of the failure (its fault's, or its most specific failing
    output's: a logic bug in any output makes the failure a logic bug), and the
    case's shapes."""
    bad = [o for o in verdict.outputs.values() if not o.passed]
    return {
        "target": verdict.target, "op": verdict.op,
        "outputs": sorted(o.name for o in bad),
        # a plain sentence (an offline judge's error) is classed by its words
        "diagnosis": diagnosis_class("", verdict.error) if isinstance(verdict.error, str)
        else verdict.failure_class,
        "shapes": {k: list(s) for k, s in sorted(verdict.case.shapes().items())},
    }


def _signature_from_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The signature of a repro folder written before signatures were stored."""
    from ..cases.case import Case  # noqa: PLC0415 - ops load with the case

    v = meta.get("verdict", {})
    diag = str(v.get("diagnosis") or "")
    out, _, text = diag.partition(": ")
    case = Case.from_dict(meta["case"])
    return {"target": meta["target"]["name"], "op": meta["target"]["op"],
            "outputs": [] if v.get("error") else [out],
            "diagnosis": diagnosis_class(text, v.get("error")),
            "shapes": {k: list(s) for k, s in sorted(case.shapes().items())}}


def _op_spec(op: str) -> dict[str, Any]:
    """``{"op_spec": ...}`` for an op made at run time (a traced reference's, whose
    ``spec()`` rebuilds it on replay); ``{"op_unlocated": why}`` for one whose
    reference cannot be found again (a lambda); else nothing."""
    from ..oracle.ops import get_op  # noqa: PLC0415 - ops load with the case

    found = get_op(op)
    spec = getattr(found, "spec", None)
    made = spec() if callable(spec) else None
    if made is None and callable(spec):
        why = unlocated_reason(getattr(found, "reference_fn", None)) or "it has no plain spec"
        return {"op_unlocated": f"op {op!r} was made from a reference that cannot be found "
                                f"again in another process: {why}"}
    return {} if made is None else {"op_spec": made}


def kernel_record(target: Target) -> dict[str, Any] | None:
    """How a repro reaches a kernel handed in as a function again (``check_kernel``,
    ``shrink --fn``, ``run --kernel``): where the function is (module and name,
    or file and name; ``unlocated``: why it cannot be found), its identity, and
    the target's backend, outputs and layouts. None for a target found by its
    ``source`` or one of numoracle's own (found by name)."""
    fn = target.fn
    fn = getattr(fn, "func", fn)  # a functools.partial's function
    if target.source or str(getattr(fn, "__module__", "")).startswith("numoracle."):
        return None
    layouts = target.layouts
    record: dict[str, Any] = {
        # a name given by the user is the kernel's identity; else the function's own
        "identity": identity(fn) if target.name == default_name(fn) else f"name:{target.name}",
        "backend": target.backend,
        "outputs": list(target.outputs),
        "layouts": {k: list(v) for k, v in layouts.items()} if isinstance(layouts, Mapping)
        else list(layouts),
        "output_layouts": dict(target.output_layouts)}
    loc = locate(fn)
    if loc is None:
        record["unlocated"] = unlocated_reason(fn) or "it cannot be found by name"
    else:
        record.update(loc)
    return record


def _key(sig: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:12]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _check_format(store: Path) -> None:
    """Create the format file of a new store; refuse a store of a newer format."""
    fmt = store / FORMAT_FILE
    if fmt.is_file():
        try:
            version = int(json.loads(fmt.read_text()).get("format", 0))
        except (ValueError, AttributeError):
            version = 0  # a half-written file cannot exist (os.replace); treat as ours
        if version > FORMAT_VERSION:
            raise InvalidArgument(
                f"the store {str(store)!r} has format {version}, newer than this numoracle's "
                f"{FORMAT_VERSION}; upgrade numoracle or use another --store folder")
        return
    store.mkdir(parents=True, exist_ok=True)
    atomic_write_text(fmt, json.dumps({"format": FORMAT_VERSION}) + "\n")


def _num(x: float) -> float | str:
    return x if np.isfinite(x) else repr(float(x))


_REPLAY_PY = '''#!/usr/bin/env python
"""Replays this numoracle repro: {describe}"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
'''


def write_repro(verdict: Verdict, target: Target, store: Path | str,
                inputs: Mapping[str, np.ndarray] | None = None) -> Path:
    """Save a failing verdict in the store under its signature; returns the folder.

    When a repro of the same signature is there already, it is kept and its
    folder returned (the store holds one repro per bug). ``inputs`` are the
    arrays of a case supplied from outside (its values do not come from its
    seed); replay then uses them.
    """
    root = Path(store)
    _check_format(root)
    sig = signature(verdict)
    kernel = kernel_record(target)
    if kernel is not None:  # two kernels of one name are two kernels
        sig["kernel"] = kernel["identity"]
    folder = root / f"{_safe(verdict.target)}-{verdict.op}-{_key(sig)}"
    if (folder / "repro.json").is_file():
        return folder
    case = verdict.case
    given = inputs is not None
    arrays_in = dict(inputs) if inputs is not None else case.inputs()
    arrays: dict[str, Any] = {f"input_{k}": v for k, v in arrays_in.items()}
    arrays.update({f"got_{k}": v for k, v in (verdict.got or {}).items()})
    meta = {
        "format": FORMAT_VERSION,
        "case": case.to_dict(),
        **_op_spec(verdict.op),
        "inputs": "arrays" if given else "seed",
        "signature": sig,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "target": {"name": target.name, "op": target.op, "precision": target.precision.name,
                   "model": target.precision.to_dict(), "source": target.source,
                   **({} if kernel is None else {"kernel": kernel})},
        "verdict": {"passed": verdict.passed, "worst_ratio": _num(verdict.worst_ratio),
                    "diagnosis": verdict.diagnosis,
                    "error": None if verdict.error is None else str(verdict.error),
                    "engine": verdict.engine, "calls_before": verdict.calls_before},
        "describe": case.describe() + (" (inputs given)" if given else ""),
    }
    tmp = root / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        np.savez_compressed(tmp / "arrays.npz", **arrays)
        (tmp / "replay.py").write_text(_REPLAY_PY.format(describe=meta["describe"]))
        (tmp / "repro.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        try:
            os.rename(tmp, folder)  # atomic; fails when the folder exists
        except OSError:
            if not (folder / "repro.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


@dataclass
class Entry:
    """One repro of the store, as ``numoracle store list`` shows it."""

    path: Path
    target: str
    op: str
    precision: str
    source: str | None
    signature: dict[str, Any]
    describe: str
    diagnosis: str
    format: int
    status: str  # "fails", "fixed" (the last replay), or "unreplayed"
    checked: str | None
    #: the kernel's identity (:func:`numoracle.callables.identity`) for a kernel
    #: handed in as a function, else None (found by name)
    kernel: str | None = None

    def row(self) -> dict[str, Any]:
        sig = self.signature
        return {"repro": self.path.name, "target": self.target, "op": self.op,
                "outputs": ",".join(sig["outputs"]) or "-", "class": sig["diagnosis"],
                "shapes": " ".join(f"{k}{tuple(v)}" for k, v in sig["shapes"].items()),
                "status": self.status, "checked": self.checked, "format": self.format,
                "path": str(self.path), "diagnosis": self.diagnosis}


def _read_entry(folder: Path) -> Entry | None:
    try:
        meta = json.loads((folder / "repro.json").read_text())
        sig = meta.get("signature") or _signature_from_meta(meta)
    except (OSError, ValueError, KeyError, InvalidArgument):
        return None
    status, checked = "unreplayed", None
    with contextlib.suppress(OSError, ValueError):
        st = json.loads((folder / "status.json").read_text())
        status, checked = st["status"], st.get("when")
    t = meta["target"]
    kernel = t.get("kernel")
    return Entry(folder, t["name"], t["op"], t.get("precision", ""), t.get("source"), sig,
                 meta.get("describe", ""), str(meta.get("verdict", {}).get("diagnosis") or ""),
                 int(meta.get("format", 0)), status, checked,
                 kernel.get("identity") if isinstance(kernel, dict) else None)


def entries(store: Path | str, *, target: str | None = None,
            op: str | None = None) -> list[Entry]:
    """The repros of the store (optionally of one target and op), oldest folders
    of earlier formats included; temporary and unreadable folders are skipped."""
    root = Path(store)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or not (folder / "repro.json").is_file():
            continue
        e = _read_entry(folder)
        if e is not None and (target is None or e.target == target) and (op is None or e.op == op):
            found.append(e)
    return found


def record_status(folder: Path, passed: bool) -> None:
    """Note a replay's outcome in the repro folder (``status.json``)."""
    with contextlib.suppress(OSError):  # a folder pruned meanwhile
        atomic_write_text(folder / "status.json", json.dumps(
            {"status": "fixed" if passed else "fails",
             "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")


def _remove(folder: Path) -> None:
    """Remove a folder so that no reader sees half of it: rename, then delete."""
    trash = folder.with_name(f".trash-{uuid.uuid4().hex}")
    try:
        os.rename(folder, trash)
    except OSError:
        return  # removed by another pruner
    shutil.rmtree(trash, ignore_errors=True)


def prune(store: Path | str, *, fixed: bool = False, targets: Sequence[str] = (),
          passes: Callable[[Entry], bool] | None = None) -> list[Entry]:
    """Remove repros: those that pass now (``fixed``: ``passes(entry)`` says
    whether one does, e.g. by replaying it; None: the last recorded status
    decides) and/or those of the named ``targets``. Left-overs of killed
    writers go too. Returns the entries removed.

    :func:`numoracle.checking.replay.prune` is this with each repro replayed."""
    if not fixed and not targets:
        raise InvalidArgument("prune needs what to remove: fixed=True (repros that pass "
                              "now) or targets=[NAME, ...]")
    root = Path(store)
    removed = []
    for e in entries(root):
        if targets and e.target not in targets:
            continue
        if fixed:
            if passes is not None:
                e.status = "fixed" if passes(e) else "fails"
            if e.status != "fixed":
                continue
        _remove(e.path)
        removed.append(e)
    if root.is_dir():
        now = time.time()
        for left in root.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if now - left.stat().st_mtime > STALE_TMP_S:
                    shutil.rmtree(left, ignore_errors=True)
        for left in root.glob(".trash-*"):
            shutil.rmtree(left, ignore_errors=True)
    return removed


def check_store(store: Path | str, *, must_exist: bool) -> Path:
    """``store`` as a folder to read: an existing store, or (``must_exist``
    False) a folder not made yet, which holds nothing. InvalidArgument for a
    file, or for a store that must exist and does not."""
    root = Path(store)
    if root.exists() and not root.is_dir():
        raise InvalidArgument(f"--store {str(store)!r} is a file, not a store folder; give "
                              "the folder repros are saved in (default .numoracle/repros)")
    if must_exist and not root.is_dir():
        raise InvalidArgument(f"--store {str(store)!r} does not exist; give the folder repros "
                              "are saved in (default .numoracle/repros, relative to where "
                              "the checks ran)")
    return root
