"""KernelBench's problems and candidates judged by the traced oracle.

A problem file (``Model``, ``get_inputs``, ``get_init_inputs``) becomes an op
whose reference is ``Model.forward``; a candidate file (``ModelNew``) becomes
the kernel under test. See ``docs/kernelbench.md``.
"""

from __future__ import annotations

from .batch import judge_many
from .cases import KBCase
from .census import ProblemOps, classify, problem_ops
from .judge import NOT_JUDGED, PASS_OFFICIAL, CaseResult, Judgement, judge
from .problem import BadFile, InputSpec, Problem, load_problem

__all__ = ["judge", "judge_many", "PASS_OFFICIAL", "NOT_JUDGED", "Judgement", "CaseResult", "KBCase", "BadFile", "InputSpec", "Problem",
           "load_problem", "ProblemOps", "classify", "problem_ops"]
