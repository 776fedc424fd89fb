"""Structured failures: what an output's result is consistent with, and why a
kernel call gave no result.

A :class:`Diagnosis` says what one judged output is: within the claimed model
(``pass``), beyond it but consistent with another precision model
(``precision``, with the model found and the others that fit as well), with an
algorithm class the claim excludes (``algorithm``), varying from run to run
(``nondeterministic``), non-finite where the reference is not (``nonfinite``),
or beyond every model (``logic``). A :class:`Fault` says why a kernel call gave
no outputs (a hang, a crash, an exception, a malformed output).

Both are plain data read by the store's signature, the advice and the reports
through their fields; their sentence (``str``) is what a person reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any

from ..oracle.precision import PrecisionModel

__all__ = ["Diagnosis", "Fault", "DiagnosisKind", "FaultKind", "KINDS", "FAULT_KINDS", "FATAL_KINDS", "most_specific",
           "failure_class"]

class DiagnosisKind(StrEnum):
    """The rungs of a diagnosis, from the least specific to the most: a failure
    is classed by its most specific failing output (a logic bug in any output
    makes it a logic bug). A member equals its name as a string (``"logic"``),
    which is what reports and repros save and what loading reads back."""

    NONE = "none"
    PASS = "pass"
    EXCEEDS = "exceeds"
    PRECISION = "precision"
    ALGORITHM = "algorithm"
    NONDETERMINISTIC = "nondeterministic"
    NONFINITE = "nonfinite"
    LOGIC = "logic"


class FaultKind(StrEnum):
    """Why a kernel call gave no outputs (:class:`Fault`); saved as its string."""

    RAISE = "raise"
    HANG = "hang"
    CRASH = "crash"
    CUDA = "cuda"
    INPUT = "input"
    OUTPUT = "output"
    OOM = "oom"
    UNSUPPORTED = "unsupported"


#: the kinds of a diagnosis, least specific first
KINDS: tuple[DiagnosisKind, ...] = tuple(DiagnosisKind)
#: the kinds of a fault (:class:`Fault`)
FAULT_KINDS: tuple[FaultKind, ...] = tuple(FaultKind)
#: fault kinds after which the process that ran the kernel cannot be trusted
FATAL_KINDS = (FaultKind.HANG, FaultKind.CRASH, FaultKind.CUDA)


def _member(kind_type: type[Enum], value: Any, what: str) -> Any:
    """``value`` as a member of ``kind_type`` (its string read back)."""
    try:
        return kind_type(value)
    except ValueError:
        raise ValueError(f"{what} kind={value!r} must be one of "
                         f"{[k.value for k in kind_type]}") from None


@dataclass(frozen=True)
class Diagnosis:
    """What one judged output is, as data and as a sentence.

    Attributes
    ----------
    kind : DiagnosisKind
        One of :data:`KINDS` (a string is read as one): ``none`` (not diagnosed), ``pass``, ``exceeds``
        (beyond the claim, no other model tried), ``precision``, ``algorithm``,
        ``nondeterministic``, ``nonfinite``, ``logic``.
    text : str
        The sentence a person reads.
    model : PrecisionModel or None
        ``pass``: the claimed model; ``precision`` and ``algorithm``: the model
        the result is consistent with (the cause found).
    alternatives : tuple of PrecisionModel
        Other models the result is consistent with as well: one case could not
        tell them apart.
    advice : str
        What to do (claim another model, compile otherwise), or empty.
    """

    kind: DiagnosisKind = DiagnosisKind.NONE
    text: str = ""
    model: PrecisionModel | None = None
    alternatives: tuple[PrecisionModel, ...] = ()
    advice: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _member(DiagnosisKind, self.kind, "Diagnosis"))

    def __str__(self) -> str:
        return f"{self.text}. {self.advice}" if self.advice else self.text

    def __contains__(self, words: str) -> bool:
        return words in str(self)

    def __bool__(self) -> bool:
        return bool(self.text)

    @property
    def ambiguous(self) -> bool:
        """Several models explain the result and none was ruled out."""
        return self.kind is DiagnosisKind.PRECISION and bool(self.alternatives)

    @property
    def specificity(self) -> int:
        """The kind's rank in :data:`KINDS`: higher is more specific."""
        return KINDS.index(self.kind)

    @property
    def cls(self) -> str:
        """The class a failure signature keeps: ``logic``, ``nonfinite``,
        ``nondeterministic``, ``precision:<model>``, ``algorithm:<model>``,
        ``pass`` or ``other``."""
        if self.kind in (DiagnosisKind.PRECISION, DiagnosisKind.ALGORITHM):
            return f"{self.kind.value}:{self.model.name if self.model is not None else '?'}"
        if self.kind in (DiagnosisKind.LOGIC, DiagnosisKind.NONFINITE,
                         DiagnosisKind.NONDETERMINISTIC, DiagnosisKind.PASS):
            return self.kind.value
        return "other"

    def with_advice(self, advice: str) -> Diagnosis:
        """The same diagnosis with ``advice`` appended to any it has."""
        return replace(self, advice=f"{self.advice} {advice}".strip())

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports (models by name)."""
        return {"kind": self.kind.value, "text": self.text,
                "model": None if self.model is None else self.model.name,
                "alternatives": [m.name for m in self.alternatives], "advice": self.advice}


@dataclass(frozen=True)
class Fault:
    """Why a kernel call gave no outputs, as data and as a sentence.

    Attributes
    ----------
    text : str
        The sentence a person reads.
    kind : FaultKind
        One of :data:`FAULT_KINDS` (a string is read as one): ``hang`` (past the timeout), ``crash`` (the
        kernel's process died), ``cuda`` (a CUDA error raised or left sticky),
        ``input`` (the kernel wrote to an input), ``raise`` (an exception),
        ``output`` (a missing or malformed output), ``oom`` (the GPU ran out of
        memory) and ``unsupported`` (the target declined the case, raising
        UnsupportedCase): for those two the case is not judged. A runner budgets the expensive kinds
        (:data:`FATAL_KINDS`).
    advice : str
        What to do, or empty.
    exception : str or None
        The exception's type name, for ``raise``.
    """

    text: str
    kind: FaultKind = FaultKind.RAISE
    advice: str = ""
    exception: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _member(FaultKind, self.kind, "Fault"))

    def __str__(self) -> str:
        return f"{self.text}. {self.advice}" if self.advice else self.text

    def __contains__(self, words: str) -> bool:
        return words in str(self)

    @property
    def cls(self) -> str:
        """The class a failure signature keeps: ``error:<kind>``, with the
        exception's name for ``raise`` (``error:raised ValueError``)."""
        if self.kind is FaultKind.RAISE and self.exception:
            return f"error:raised {self.exception}"
        return f"error:{self.kind.value}"


def most_specific(diagnoses: Iterable[tuple[str, Diagnosis]]) -> tuple[str, Diagnosis] | None:
    """The (output, diagnosis) pair of the most specific kind; the first of
    equals (outputs in the op's order); None for none."""
    best: tuple[str, Diagnosis] | None = None
    for pair in diagnoses:
        if best is None or pair[1].specificity > best[1].specificity:
            best = pair
    return best


def failure_class(error: Fault | str | None, diagnoses: Iterable[Diagnosis]) -> str:
    """The class of a failure: the fault's (:attr:`Fault.cls`; ``error`` for a
    plain sentence), else the most specific failing output's (:attr:`Diagnosis.cls`)."""
    if error is not None:
        return error.cls if isinstance(error, Fault) else "error"
    best = most_specific(("", d) for d in diagnoses)
    return "other" if best is None else best[1].cls
