"""KernelBench's problems and candidates judged by the traced oracle.

A problem file (``Model``, ``get_inputs``, ``get_init_inputs``) becomes an op
whose reference is ``Model.forward``; a candidate file (``ModelNew``) becomes
the kernel under test. See ``docs/kernelbench.md``.
"""

from __future__ import annotations

from .cases import KBCase
from .census import ProblemOps, classify, problem_ops
from .judge import CaseResult, Judgement, judge
from .problem import BadFile, InputSpec, Problem, load_problem

__all__ = ["judge", "Judgement", "CaseResult", "KBCase", "BadFile", "InputSpec", "Problem",
           "load_problem", "ProblemOps", "classify", "problem_ops"]
