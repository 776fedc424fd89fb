"""Every rule of the library has an mpmath-checked case (none can be added untested),
and an op without a rule is refused by name."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import numoracle.oracle.traced.library  # noqa: F401  (registers the rules)
from numoracle.oracle.traced import RULES, NoRule, lookup


def _tested() -> set[str]:
    names: set[str] = set()
    for path in sorted(Path(__file__).parent.glob("test_rules_*.py")):
        if path.stem == Path(__file__).stem:
            continue
        mod = importlib.import_module(path.stem)
        names |= {c.name for c in getattr(mod, "CASES", ())}
        names |= set(getattr(mod, "ALSO_TESTED", ()))
    return names


def test_every_rule_has_a_checked_case() -> None:
    untested = sorted(set(RULES) - _tested())
    assert not untested, f"rules without a case checked against torch and mpmath: {untested}"


def test_cases_name_registered_rules() -> None:
    unknown = sorted(_tested() - set(RULES))
    assert not unknown, f"cases for ops without a rule: {unknown}"


def test_no_rule_is_refused_by_name() -> None:
    with pytest.raises(NoRule, match=r"no rule for aten\.bernoulli\.p"):
        lookup("aten.bernoulli.p")
