"""Soundness that does not depend on the size limits: every correct CPU target
passes cases drawn under several ``max_elements`` settings, every value family
(``special`` included) drawn.

Small limits draw what large ones rarely do (one sample, one feature, a
subnormal upstream gradient beside a huge scale: the false alarms of the KAN
and MLP-training references under ``max_elements=1024``). ``python -m benchmarks sweep
--limits 256,1024,default,262144`` runs the same over thousands of cases.
"""

from __future__ import annotations

import pytest

from numoracle.kernels import available_targets
from numoracle.running.runner import default_strategy, run_target

#: tiny, small, the strategy's default (None) and large
LIMITS = (256, 1024, None, 1 << 18)
CPU_BACKENDS = ("numpy", "torch-cpu")


def _cpu_targets() -> list[tuple[str, str]]:
    return [(t.name, t.op) for t in available_targets() if t.backend in CPU_BACKENDS]


#: cases per run (every family, then ``special`` alone), and a time cap per run that
#: keeps slow ops (a cellular automaton's many steps) from dominating the default run
EXAMPLES = {"small": (4, 2), "large": (2, 1)}
SECONDS = 2.0


@pytest.mark.parametrize("limit", LIMITS, ids=lambda v: f"max_elements={v or 'default'}")
@pytest.mark.parametrize(("name", "op"), _cpu_targets(), ids=lambda v: str(v))
def test_correct_cpu_target_passes_under_every_limit(name: str, op: str,
                                                     limit: int | None) -> None:
    from numoracle.kernels import get_target

    target = get_target(name, op)
    sizes = {} if limit is None else {"max_elements": limit}
    judged = 0
    every, special = EXAMPLES["small" if limit is not None and limit <= 1024 else "large"]
    for families, seed, examples in ((None, 0, every), (("special",), 1, special)):
        kw = dict(sizes) if families is None else {**sizes, "families": families}
        res = run_target(target, examples=examples, seed=seed, store=None, seconds=SECONDS,
                         strategy=default_strategy(target, **kw), shrink=False)
        assert res.verdict == "pass", f"{name} {op} {kw}: {res.message or res.diagnosis}"
        judged += res.cases  # cases the op does not judge (non-finite inputs) not counted
    assert judged > 0
