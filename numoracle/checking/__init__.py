"""Checking: targets, one case judged (:mod:`.check`), verdicts and their
diagnosis (:mod:`.verdict`), reports (:mod:`.report`), reruns
(:mod:`.rerun`) and runs of many drawn cases (:mod:`.runner`).

Dependency direction: ``oracle`` ← ``cases``/``strategies``/``kernels`` ←
``store`` (repros as data) ← ``checking`` (the kernel called in :mod:`.call`,
isolated in :mod:`.isolate`, judged in :mod:`.check`, repros replayed in
:mod:`.replay`, cases from outside shrunk in :mod:`.shrink`) ← ``running`` ←
``api`` ← ``cli``/``pytest_plugin``. The store holds data and never runs a kernel.
"""

from __future__ import annotations

from .check import check_case, judge, run_kernel
from .rerun import RerunVerdict, check_reruns
from .verdict import OutputVerdict, Verdict

__all__ = ["check_case", "run_kernel", "judge", "Verdict", "OutputVerdict",
           "check_reruns", "RerunVerdict"]
