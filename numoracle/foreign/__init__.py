"""Kernels in any language: shared-library, command and offline targets.

* :func:`shared_library_target`: a C-ABI symbol of a ``.so`` (C, Fortran with
  ``bind(c)``, Rust ``cdylib``, CUDA C taking device pointers), called through
  ctypes with the arguments a declarative spec lists;
* :func:`command_target`: an external program exchanging ``.npy`` files in a
  case folder, once per case or as one persistent process;
* :func:`write_cases` / :func:`judge_folder` (``numoracle cases`` and
  ``numoracle judge``): a case set written for a program that cannot be
  driven, its outputs judged afterwards;
* :func:`wgsl_target`: a WGSL compute shader dispatched through wgpu
  (:mod:`numoracle.foreign.wgsl`).

Each target is a :class:`~numoracle.targets.target.Target` like any other
(:func:`numoracle.running.runner.run_target` shrinks its failures, a repro
replays the same library call or command); :func:`run` adds the layout probe
(:mod:`numoracle.foreign.probe`) to a failure's diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..outcome import RunVerdict
from .command import command_target
from .offline import judge_folder, write_cases
from .probe import declared_layouts, layout_diagnosis
from .sharedlib import ForeignError, shared_library_target
from .spec import ArgSpec
from .wgsl import wgsl_target

if TYPE_CHECKING:
    from ..targets.target import Target
    from ..checking.verdict import Verdict
    from ..running.runner import TargetResult

__all__ = ["shared_library_target", "command_target", "wgsl_target", "write_cases",
           "judge_folder", "from_spec", "run", "ArgSpec", "ForeignError", "layout_diagnosis"]


def from_spec(spec: Mapping[str, Any], *, source: str | None = None) -> Target:
    """The target a spec file describes (``kind``: ``shared_library``,
    ``command`` or ``wgsl``): what a repro's spec file (:mod:`numoracle.foreign.rebuild`)
    calls to make the target again."""
    kw = {k: v for k, v in spec.items() if k != "kind"}
    kind = spec.get("kind")
    if kind == "shared_library":
        return shared_library_target(source=source, **kw)
    if kind == "command":
        return command_target(source=source, **kw)
    if kind == "wgsl":
        kw.pop("shader_path", None)
        return wgsl_target(kw.pop("shader"), source=source, **kw)
    raise InvalidArgument(f"spec kind {kind!r} is unknown; a foreign target spec has kind "
                          "'shared_library', 'command' or 'wgsl'")


def run(target: Target, **kwargs: Any) -> TargetResult:
    """:func:`~numoracle.running.runner.run_target` on ``target``, with the
    layout probe on the shrunk failure: when a failure is a layout mix-up, the
    diagnosis names the layout (``the kernel writes grad_weight as OIHW, but it
    is declared OIHW:F``). Keyword arguments are ``run_target``'s.

    Foreign calls are isolated unless told otherwise: a CPU shared-library
    target isolates each call itself, a command is a process of its own, and
    a GPU shared-library target (whose calls cannot be isolated alone) runs
    whole in the worker process unless ``isolate=False`` is passed. Cases
    are drawn with the parameters the target fixes (its ``params``)."""
    from ..running.runner import default_strategy, run_target  # noqa: PLC0415 - hypothesis

    fn = target.fn
    if "isolate" not in kwargs:
        kwargs["isolate"] = getattr(fn, "foreign_spec", None) is not None and \
            getattr(fn, "backend", "numpy") != "numpy" and not getattr(fn, "isolate", False)
    fixed = getattr(fn, "fixed", None)
    if fixed and kwargs.get("strategy") is None:
        kwargs["strategy"] = default_strategy(
            target, params={k: tuple(v) if isinstance(v, list) else v for k, v in fixed.items()})
    seen: dict[str, Verdict] = {}
    user = kwargs.pop("on_case", None)

    def on_case(v: Verdict) -> None:
        if not v.passed:
            seen["last"] = v
        if user is not None:
            user(v)

    res = run_target(target, on_case=on_case, **kwargs)
    last = seen.get("last")
    if res.verdict is RunVerdict.FAIL and last is not None and last.got:
        note = layout_diagnosis(last.case, target.precision, last.case.inputs(), last.got,
                                declared_layouts(target.fn))
        if note:
            res.diagnosis = f"{res.diagnosis}; {note}"
            res.message = f"{res.message}\n  {note}"
    return res
