"""Checking: one case judged (:mod:`.check`), verdicts and their diagnosis
(:mod:`.verdict`), reports (:mod:`.report`), reruns (:mod:`.rerun`).

Dependency direction: ``oracle`` ← ``cases`` ← ``targets`` (the harness a
kernel runs in) ← ``store`` (repros as data) ← ``checking`` (the kernel called
in :mod:`.call`, isolated in :mod:`.isolate`, judged in :mod:`.check`, repros
replayed in :mod:`.replay`, cases from outside shrunk in :mod:`.shrink`) ←
``running`` ←
``api`` ← ``cli``/``pytest_plugin``; the kernels under test (``kernels``) sit
above ``targets`` and are never imported here: a replay that must find one by
name is handed a resolver. The store holds data and never runs a kernel.
"""

from __future__ import annotations

from .check import check_case, judge, run_kernel
from .rerun import RerunVerdict, check_reruns
from .verdict import OutputVerdict, Verdict

__all__ = ["check_case", "run_kernel", "judge", "Verdict", "OutputVerdict",
           "check_reruns", "RerunVerdict"]
