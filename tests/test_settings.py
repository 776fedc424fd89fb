"""RunSettings: one frozen object with named profiles, the budget read in one place."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import numoracle
from numoracle.api import run_settings
from numoracle.errors import InvalidArgument
from numoracle.settings import DEFAULT_PROFILE, REPORT_RESERVE, SHRINK_SHARE, RunSettings


def mm(a: Any, b: Any) -> dict[str, Any]:
    return {"out": np.matmul(a, b)}


@pytest.fixture
def restored() -> Iterator[None]:
    """Put the loaded profile back after a test that loads another."""
    before = RunSettings.loaded_profile()
    yield
    RunSettings.load_profile(before)


def test_settings_are_frozen_and_travel_by_pickle() -> None:
    s = RunSettings(examples=10, store=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.examples = 20  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(s)) == s


def test_keywords_and_a_settings_object_give_the_same_settings(tmp_path: Path) -> None:
    by_keywords = numoracle.validate(op="matmul", examples=7, seed=3, store=tmp_path,
                                     timeout=30)(mm)
    given = RunSettings(examples=7, seed=3, store=tmp_path, timeout=30)
    by_object = numoracle.validate(op="matmul", settings=given)(mm)
    assert by_keywords.settings == by_object.settings == RunSettings.default().replace(
        examples=7, seed=3, store=tmp_path, timeout=30)
    # keywords change the object they are given with
    assert run_settings(settings=given, seed=None).seed is None
    assert run_settings(settings=given, seed=None).examples == 7


def test_a_check_runs_with_the_settings_it_is_given() -> None:
    result = numoracle.check_kernel(mm, op="matmul",
                                    settings=RunSettings(examples=4, store=None))
    assert result.verdict == "pass" and result.cases == 4


def test_profiles_are_registered_loaded_and_named(restored: None) -> None:
    RunSettings.register_profile("test-quick", examples=6, store=None)
    RunSettings.register_profile("test-quicker", RunSettings.get_profile("test-quick"),
                                 examples=3)
    assert RunSettings.get_profile("test-quicker") == RunSettings(examples=3, store=None)
    assert numoracle.check_kernel(mm, op="matmul", profile="test-quick").cases == 6
    RunSettings.load_profile("test-quicker")
    assert RunSettings.loaded_profile() == "test-quicker"
    assert numoracle.check_kernel(mm, op="matmul").cases == 3  # the loaded profile's
    assert numoracle.check_kernel(mm, op="matmul", examples=5).cases == 5  # a keyword wins
    RunSettings.load_profile(DEFAULT_PROFILE)
    assert RunSettings.default() == RunSettings()


@pytest.mark.parametrize("budget", [2.0, 60.0, 600.0])
def test_the_budget_is_read_in_one_place(budget: float) -> None:
    s = RunSettings(budget=budget)
    assert s.deadline(100.0) == 100.0 + budget
    assert s.shrink_grace == REPORT_RESERVE * budget
    assert s.shrink_cap == max(SHRINK_SHARE * budget, 1.0)
    assert s.replace(shrink_seconds=0.5).shrink_cap == 0.5  # an explicit cap wins
    kept = budget - s.judging_seconds()
    assert kept == pytest.approx(REPORT_RESERVE * budget)
    # pictures take their time out of the budget, but the report never keeps over a fifth
    assert budget - s.judging_seconds(pictures=1000) == pytest.approx(0.2 * budget)
    assert s.judging_seconds(pictures=1) < s.judging_seconds()


def test_without_a_budget_nothing_is_limited() -> None:
    s = RunSettings()
    assert s.deadline(5.0) is None and s.judging_seconds(3) is None
    assert s.shrink_cap is None and s.shrink_grace == 0.0


@pytest.mark.parametrize(("make", "match"), [
    (lambda: RunSettings(examples=0), "examples=0 must be a positive int"),
    (lambda: RunSettings(examples=2.5), "examples=2.5"),  # type: ignore[arg-type]
    (lambda: RunSettings(seed="0"), "seed='0' must be an int"),  # type: ignore[arg-type]
    (lambda: RunSettings(isolate="yes"), "isolate='yes'"),  # type: ignore[arg-type]
    (lambda: RunSettings(timeout=-1), "timeout=-1 must be a positive number"),
    (lambda: RunSettings(budget=0), "budget=0"),
    (lambda: RunSettings(min_cases=0), "min_cases=0"),
    (lambda: RunSettings(shrink_seconds=-2), "shrink_seconds=-2"),
    (lambda: RunSettings(store=3), "store=3"),  # type: ignore[arg-type]
    (lambda: RunSettings().replace(budgt=5), r"\['budgt'\] are not run settings"),
    (lambda: RunSettings.get_profile("no-such"), "profile 'no-such' is not registered"),
    (lambda: RunSettings.load_profile("no-such"), "profile 'no-such' is not registered"),
    (lambda: run_settings(settings=RunSettings(), profile="default"), "not both"),
    (lambda: numoracle.check_kernel(mm, op="matmul", timeout=0), "timeout=0"),
    (lambda: numoracle.validate(op="matmul", examples=-1), "examples=-1"),
])
def test_invalid_settings(make: Callable[[], Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        make()
