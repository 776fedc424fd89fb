"""Repros: a failing case saved small and self-contained, replayed by one command.

A repro is a folder holding ``repro.json`` (the case, the target and how to
find it again: a registry target by name, one of a ``TARGETS`` list by its
source, a kernel handed in as a function by its module or file and name, a
traced op by its reference and that reference's content hash; the verdict in
brief), ``arrays.npz`` (the inputs and the
outputs the kernel returned) and ``replay.py``, a script that runs
``numoracle replay`` on its own folder.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cases.case import Case
from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model
from .store import write_repro

if TYPE_CHECKING:
    from ..targets.target import Target
    from ..checking.verdict import Verdict

__all__ = ["save_repro", "load_repro", "Repro", "DEFAULT_STORE"]

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
    #: calls the run had made to the kernel before the failing one
    calls_before: int = 0
    #: how to reach a kernel handed in as a function again
    #: (:func:`numoracle.store.store.kernel_record`), else None
    kernel: dict[str, Any] | None = None
    #: a sentence when the op's reference differs from the one the repro was
    #: saved with (its content hash changed), else ""
    reference_changed: str = ""


def save_repro(verdict: Verdict, target: Target, *, store: Path | str = DEFAULT_STORE,
               inputs: dict[str, np.ndarray] | None = None) -> Path:
    """Save ``verdict``'s case as a repro folder in the store ``store``
    (:mod:`numoracle.store.store`: one folder per failure signature, written
    atomically); returns the folder. ``inputs``: the arrays of a case supplied
    from outside, which replay then uses instead of the case's seed."""
    folder = write_repro(verdict, target, store, inputs)
    verdict.repro = str(folder)
    return folder


def _damaged(folder: Path, what: str) -> InvalidArgument:
    return InvalidArgument(f"the repro {str(folder)!r} is damaged: {what}; save it again by "
                           "running the check that found it (or remove the folder)")


def load_repro(path: Path | str) -> Repro:
    """Read a repro folder (or its ``repro.json``).

    Raises
    ------
    InvalidArgument
        When ``path`` is no repro, or its ``repro.json`` or ``arrays.npz`` is
        damaged (not JSON, keys missing, not an npz archive), or its inputs
        came from outside and ``arrays.npz`` is gone: one sentence saying
        which, and what to do.
    """
    p = Path(path)
    folder = p.parent if p.name == "repro.json" else p
    meta_file = folder / "repro.json"
    if not meta_file.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a repro: no repro.json in {folder}; "
                              "give the folder a failing run printed")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise _damaged(folder, f"repro.json cannot be read ({exc})") from None
    except ValueError as exc:
        raise _damaged(folder, f"repro.json is not valid JSON ({exc})") from None
    changed = ""
    if isinstance(meta, dict) and "op_spec" in meta:  # an op made from a reference at run
        from ..oracle.traced.op import restore_op  # noqa: PLC0415 - torch only for such ops

        spec = meta["op_spec"]
        op_now = restore_op(spec)  # time: made again
        saved, now = spec.get("reference_hash"), getattr(op_now, "reference_hash", None)
        if saved and now and saved != now:
            changed = (f"the reference {spec.get('reference')} changed since this repro was "
                       f"saved (content hash {saved}, now {now}): the kernel is judged "
                       "against the reference as it is now")
    elif isinstance(meta, dict) and "op_unlocated" in meta:
        from ..oracle.ops import OPS  # noqa: PLC0415 - ops load with the case

        if meta.get("target", {}).get("op") not in OPS:
            raise InvalidArgument(f"the repro {str(folder)!r} cannot be replayed in this "
                                  f"process: {meta['op_unlocated']}")
    try:
        case = Case.from_dict(meta["case"])
        t = meta["target"]
        model = get_model(t["model"] if "model" in t else t["precision"])
        name, op = t["name"], t["op"]
    except (KeyError, TypeError, ValueError, AttributeError, InvalidArgument) as exc:
        raise _damaged(folder, f"repro.json lacks or garbles its case or target "
                               f"({type(exc).__name__}: {exc})") from None
    stored_inputs = meta.get("inputs") == "arrays"
    arrays = folder / "arrays.npz"
    if arrays.is_file():
        try:
            with np.load(arrays, allow_pickle=False) as z:
                inputs = {k[6:]: z[k] for k in z.files if k.startswith("input_")}
                got = {k[4:]: z[k] for k in z.files if k.startswith("got_")}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise _damaged(folder, f"arrays.npz is not a readable NumPy archive ({exc})") \
                from None
    elif stored_inputs:
        raise InvalidArgument(f"{folder} has no arrays.npz: this case's inputs came from "
                              "outside and are kept only there; restore the file to replay it")
    else:  # the inputs come from the case's seed; the recorded outputs are gone
        inputs, got = case.inputs(), {}
    verdict = meta.get("verdict", {})
    kernel = t.get("kernel")
    return Repro(folder, case, name, op, model, t.get("source"), inputs, got,
                 verdict if isinstance(verdict, dict) else {}, stored_inputs,
                 int(verdict.get("calls_before", 0) or 0) if isinstance(verdict, dict) else 0,
                 kernel if isinstance(kernel, dict) else None, changed)
