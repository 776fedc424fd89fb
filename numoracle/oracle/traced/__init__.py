"""The traced oracle: a PyTorch reference function becomes an op (DESIGN §7).

A reference is captured per case as an ATen graph (:mod:`.capture`) and
evaluated over :class:`~numoracle.oracle.tracked.Tracked` arrays, one rule per
ATen primitive (:mod:`.rules`), so the bound of any composition follows from
the bounds of its primitives. An ATen op without a rule is refused by name
(:class:`NoRule`), never approximated.
"""

from __future__ import annotations

from .rules import RULES, Claims, NoRule, RuleContext, lookup, rule

__all__ = ["RULES", "Claims", "NoRule", "RuleContext", "lookup", "rule"]
