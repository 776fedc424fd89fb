"""How a run of one target on one op came out, as enums in the process and
as their strings when saved.

Two vocabularies, one the reading of the other:

- :class:`RunVerdict` is how the run ended, as the runner sets it
  (:attr:`numoracle.running.runner.TargetResult.verdict`): it passed every
  case it judged, it failed one, it could not run here, it raised, or its
  cases were never judged (a block lost on a cluster).
- :class:`Outcome` is what a row of a report says
  (:meth:`numoracle.running.runner.TargetResult.status`): ``pass`` only when
  cases were judged and passed; a verdict that passed no judged case, or a run
  that did not complete, is ``unjudged``.

Both are :class:`~enum.StrEnum`: a member equals its string, which is what
``report.json``, ``zoo.json`` and the tables save, so saved files read back
as members (``RunVerdict("FAIL")``, :meth:`Outcome.read`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RunVerdict", "Outcome"]


class RunVerdict(StrEnum):
    """How a run of a target on an op ended; saved as its string (``"FAIL"``
    in capitals, as reports have always written it).

    Examples
    --------
    >>> RunVerdict("FAIL") is RunVerdict.FAIL, RunVerdict.PASS == "pass"
    (True, True)
    """

    #: every case judged passed (none may have been judged: :class:`Outcome`)
    PASS = "pass"
    #: a case failed; the shrunk failure is recorded
    FAIL = "FAIL"
    #: the target cannot run here (its backend or device is missing)
    SKIPPED = "skipped"
    #: the run raised before it could judge (Hypothesis gave up, an internal error)
    ERROR = "error"
    #: the run's cases were never judged (a block lost on a cluster, a row not reached)
    UNJUDGED = "unjudged"


class Outcome(StrEnum):
    """How a row (a target on an op) came out: :meth:`TargetResult.status`.
    A member equals its string (``"pass"``), which is what ``report.json``
    saves; :meth:`read` reads a saved one back, and the ``verdict`` spelling
    of a run (``"FAIL"``, ``"error"``) as well."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"
    UNJUDGED = "unjudged"

    @classmethod
    def read(cls, text: str) -> Outcome:
        """The outcome a saved string names (a status, or a run's verdict).

        Examples
        --------
        >>> Outcome.read("FAIL"), Outcome.read("pass"), Outcome.read("error")
        (<Outcome.FAIL: 'fail'>, <Outcome.PASS: 'pass'>, <Outcome.UNJUDGED: 'unjudged'>)
        """
        try:
            return cls(str(text).lower())
        except ValueError:
            return cls.UNJUDGED  # a run that did not complete ("error", "interrupted")
