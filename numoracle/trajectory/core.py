"""What every training-trajectory check shares: the per-step verdicts, the
first failing step and tensor, and the free-running drift summary.

:mod:`numoracle.trajectory.cnn` (a tiny CNN trained by SGD) and
:mod:`numoracle.trajectory.steps` (optimizer steps and MLP training steps)
both judge a trajectory step by step with teacher forcing and name the first
tensor, in data-flow order, that breaks its bound; this module holds that part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..checking.diagnosis import Diagnosis, DiagnosisKind
from ..checking.verdict import OutputVerdict, diagnose
from ..oracle.precision import PrecisionModel
from ..oracle.tracked import Tracked

__all__ = ["StepFailure", "StepVerdict", "Drift", "TrajectoryVerdict", "first_failure",
           "host_array", "native_array"]

@dataclass(frozen=True)
class StepFailure:
    """The first tensor of a trajectory that broke its bound."""

    step: int
    tensor: str
    ratio: float
    diagnosis: str
    index: tuple[int, ...] = ()
    reference: float = float("nan")
    got: float = float("nan")
    bound: float = float("nan")

    def __str__(self) -> str:
        where = f" at {self.index}" if self.index else ""
        return (f"step {self.step}, tensor {self.tensor!r}: worst err/bound {self.ratio:.3g}"
                f"{where} (got {self.got:.9g}, oracle {self.reference:.9g}, bound "
                f"{self.bound:.3g}); {self.diagnosis}")


@dataclass
class StepVerdict:
    """The judgement of one step: one
    :class:`~numoracle.checking.verdict.OutputVerdict` per tensor."""

    step: int
    outputs: dict[str, OutputVerdict] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems and all(o.passed for o in self.outputs.values())

    @property
    def worst_ratio(self) -> float:
        if self.problems:
            return float("inf")
        return max((o.worst_ratio for o in self.outputs.values()), default=0.0)


@dataclass(frozen=True)
class Drift:
    """The kernel's final parameters against the oracle's untethered trajectory
    (float64 values of the oracle's own steps from the same start): the largest
    absolute differences. Informative, not judged."""

    steps: int
    weight: float
    bias: float | None
    loss: float

    def __str__(self) -> str:
        b = "" if self.bias is None else f", bias {self.bias:.3g}"
        return (f"free-running drift after {self.steps} steps: max |weight - oracle| "
                f"{self.weight:.3g}{b}; final loss differs by {self.loss:.3g}")


@dataclass
class TrajectoryVerdict:
    """The judgement of a training trajectory, step by step.

    ``first_failure`` names the first step (1-based) and tensor, in data-flow
    order ``y, loss, grad_weight, grad_bias, weight, bias``, whose error broke
    its bound; None when every step passed.
    """

    model: str
    steps: list[StepVerdict]
    first_failure: StepFailure | None
    drift: Drift | None

    @property
    def passed(self) -> bool:
        return self.first_failure is None

    @property
    def worst_ratio(self) -> float:
        return max((s.worst_ratio for s in self.steps), default=0.0)

    def message(self) -> str:
        """A few lines: the verdict, the worst ratio per step, the drift."""
        head = (f"trajectory of {len(self.steps)} steps within {self.model} "
                f"(worst err/bound {self.worst_ratio:.3g})" if self.passed else
                f"trajectory breaks the {self.model} bound first at {self.first_failure}")
        lines = [head]
        for s in self.steps:
            parts = [f"{k} {o.worst_ratio:.3g}" for k, o in s.outputs.items()]
            parts += [f"{k}: {v}" for k, v in s.problems.items()]
            lines.append(f"  step {s.step}: {'pass' if s.passed else 'FAIL'}  "
                         + ", ".join(parts))
        if self.drift is not None:
            lines.append(f"  {self.drift}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.message()


def native_array(a: Any) -> np.ndarray:
    """A NumPy copy, in its own dtype, of a NumPy, torch or CuPy array (or a scalar)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    elif hasattr(a, "get") and not isinstance(a, (dict, np.ndarray)):
        a = a.get()
    return np.array(a, copy=True)


def host_array(a: Any) -> np.ndarray:
    """A float64 NumPy copy of a NumPy, torch or CuPy array (or a scalar)."""
    return native_array(a).astype(np.float64)


def first_failure(rec: StepVerdict, names: Sequence[str], arrays: Mapping[str, np.ndarray],
                  claimed: PrecisionModel,
                  reference: Callable[[PrecisionModel], Mapping[str, Tracked]] | None,
                  *, ladder: bool = True) -> StepFailure:
    """The first tensor of ``names`` (data-flow order) that failed in step
    ``rec``, diagnosed when ``reference`` is given: ``reference(model)`` is the
    step's tracked reference under another precision model (``ladder=False``
    tries the claimed model's variants only: composed steps)."""
    for name in names:
        if name in rec.problems:
            return StepFailure(rec.step, name, float("inf"), rec.problems[name])
        out = rec.outputs[name]
        if out.passed:
            continue
        if reference is not None:
            def reference_for(m: PrecisionModel, name: str = name) -> Tracked:
                with np.errstate(all="ignore"):
                    return reference(m)[name]
            diagnose(out, arrays[name], claimed, reference_for, ladder=ladder)
        else:
            out.diagnosis = Diagnosis(DiagnosisKind.NONFINITE, out.nonfinite) if out.nonfinite \
                else Diagnosis(DiagnosisKind.EXCEEDS, f"exceeds {claimed.name}")
        w = out.worst[0] if out.worst else None
        if w is None:
            return StepFailure(rec.step, name, out.worst_ratio, str(out.diagnosis))
        return StepFailure(rec.step, name, out.worst_ratio, str(out.diagnosis), w.index,
                           w.reference, w.got, w.bound)
    raise AssertionError("a failing step without a failing tensor")  # pragma: no cover
