"""Every checked case of the rule library's tests, judged again on other inputs:
torch float32 must lie within each rule's bound.

For each case of ``tests/oracle/traced/test_rules_*.py`` (its ``CASES``) and each
seed, the floating tensor arguments are replaced by fresh ones of the same
shapes in four value regimes (``fresh``: normal at a random scale from 1e-3 to
100; ``int``: integers in [-8, 8], the exact regime; ``heavy``: magnitudes over
eight decades; ``cancel``: 1e3-sized values plus unit noise) and the case is
checked as the tests check it (bound containment only: no mpmath, no sharpness).
Cases whose inputs must keep a structure the regimes break (positive arguments of
logarithms and roots, saved statistics and indices of backward ops, integer casts)
keep their own inputs (checked once). Uninitialised tensors (``empty*``) have no values to judge.
:func:`stress` writes ``rules_stress.json``.
"""

from __future__ import annotations

import collections
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_json

__all__ = ["MODES", "regime", "stress"]

TESTS = Path(__file__).resolve().parents[2] / "tests" / "oracle" / "traced"
MODULES = ("test_rules_elementwise", "test_rules_reductions", "test_rules_views",
           "test_rules_pooling", "test_rules_convolution")
#: cases whose arguments keep their structure (domains, saved statistics, indices)
KEEP_INPUTS = {
    "aten._softmax_backward_data.default", "aten._log_softmax_backward_data.default",
    "aten.native_layer_norm_backward.default", "aten.native_group_norm_backward.default",
    "aten.native_batch_norm_backward.default", "aten.max_pool2d_with_indices_backward.default",
    "aten.max_pool3d_with_indices_backward.default", "aten.nll_loss_forward.default",
    "aten.nll_loss_backward.default", "aten.nll_loss2d_forward.default",
    "aten.nll_loss2d_backward.default", "aten.log.default", "aten.log2.default",
    "aten.sqrt.default", "aten.rsqrt.default", "aten.log1p.default",
    "aten.reciprocal.default", "aten._native_batch_norm_legit_no_training.default",
    "aten.pow.Tensor_Scalar", "aten._to_copy.default"}
UNINITIALISED = ("aten.empty", "aten.new_empty", "aten.empty_like", "aten.empty_permuted")
MODES = ("fresh", "int", "heavy", "cancel")


def regime(a: Any, mode: str, rng: np.random.Generator) -> Any:
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        shape = tuple(a.shape)
        if mode == "fresh":
            v = rng.standard_normal(shape) * float(rng.choice([1e-3, 0.1, 1.0, 10.0, 100.0]))
        elif mode == "int":
            v = rng.integers(-8, 9, shape).astype(np.float64)
        elif mode == "heavy":
            v = rng.standard_normal(shape) * 10.0 ** rng.uniform(-4, 4, shape)
        else:
            v = rng.standard_normal(shape) * 1e3 + rng.standard_normal(shape)
        return torch.from_numpy(np.asarray(v, dtype=np.float32))
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
        return type(a)(regime(x, mode, rng) for x in a)
    return a


def stress(seeds: Sequence[int], out: Path, argv: Sequence[str]) -> int:
    """Judge every rule case once per seed and regime; write ``out/rules_stress.json``.
    Returns 1 when any case left its bound, else 0."""
    sys.path.insert(0, str(TESTS))
    from traced_rulecheck import (  # type: ignore[import-not-found]  # noqa: PLC0415
        RuleCase,  # the tests' checker
        check,
    )

    t0 = time.perf_counter()
    runs, fails = 0, collections.Counter[str]()
    first: dict[str, str] = {}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for name in MODULES:
            for case in importlib.import_module(name).CASES:
                if case.name.startswith(UNINITIALISED):
                    continue
                kept = case.name in KEEP_INPUTS
                if kept and seed:
                    continue  # its own inputs: once
                for mode in ("own",) if kept else MODES:
                    args = case.args if kept else tuple(regime(x, mode, rng) for x in case.args)
                    runs += 1
                    try:
                        with np.errstate(all="ignore"):
                            check(RuleCase(case.name, args, case.kwargs, None, case.claims,
                                           case.model, sharp=False, id=case.id))
                    except AssertionError as e:
                        key = f"{case} [{mode}]"
                        fails[key] += 1
                        first.setdefault(key, str(e)[:300])
    record = {"meta": meta(argv), "runs": runs,
              "failures": sum(fails.values()), "by_case": dict(fails), "first": first,
              "seconds": round(time.perf_counter() - t0, 1)}
    write_json(out / "rules_stress.json", record)
    print("runs", runs, "failures", record["failures"])
    return 0 if not fails else 1
