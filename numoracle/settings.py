"""How a check or a run is run: one frozen :class:`RunSettings`, with named profiles.

Every way in takes the same object: :func:`numoracle.check_kernel` and
:func:`numoracle.validate` (their ``examples=``, ``seed=``, ``store=``,
``isolate=`` and ``timeout=`` build one, over ``settings=`` or a ``profile=``),
:func:`numoracle.running.runner.run_target`, a scheduled run's rows
(:mod:`numoracle.running.schedule`), a Ray cluster
(:func:`numoracle.running.cluster.run_cluster`) and ``numoracle run``, whose
flags build one (:func:`numoracle.cli._common.run_settings`).

Profiles work as Hypothesis's do: :meth:`RunSettings.register_profile` names
settings, :meth:`RunSettings.load_profile` makes a profile the one
:meth:`RunSettings.default` returns (what a check takes where no argument
says otherwise), :meth:`RunSettings.get_profile` returns one by name. The
pytest plugin's ``--numoracle-isolate`` and ``--numoracle-timeout`` load a
profile of their own for the session and put the previous one back after it.

The time budget (``--budget``) is read here and nowhere else: a run's
deadline (:meth:`RunSettings.deadline`), the seconds left for judging once the
report's share is kept (:meth:`RunSettings.judging_seconds`), the cap on
shrinking a failure (:attr:`RunSettings.shrink_cap`) and the grace shrinking
may take past the end (:attr:`RunSettings.shrink_grace`).

Examples
--------
>>> s = RunSettings(examples=200, budget=60)
>>> s.shrink_cap, s.shrink_grace, s.judging_seconds()
(6.0, 3.0, 57.0)
>>> RunSettings.register_profile("quick", examples=20, store=None)
>>> RunSettings.get_profile("quick").examples
20
>>> s.replace(seed=None).seed is None
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from .checking.call import DEFAULT_TIMEOUT
from .errors import InvalidArgument
from .store.repro import DEFAULT_STORE

__all__ = ["RunSettings", "MIN_CASES", "REPORT_RESERVE", "SHRINK_SHARE", "DEFAULT_PROFILE"]

#: cases every row of a run gets before any row gets more
MIN_CASES = 20
#: share of the budget kept for the table and the report (plus time per picture)
REPORT_RESERVE = 0.05
#: a failure's shrinking may take this share of the budget (at least 1 s)
SHRINK_SHARE = 0.1
#: seconds of the budget a report picture is given, and the most of the budget the
#: report may keep
_PICTURE_SECONDS, _REPORT_MOST = 0.4, 0.2
#: the profile loaded until another is
DEFAULT_PROFILE = "default"


def _positive(name: str, value: Any, example: str, *, optional: bool = True,
              integer: bool = False) -> None:
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        what = "a positive int" if integer else "a positive number"
        raise InvalidArgument(f"{name}={value!r} must be {what}"
                              + (" or None" if optional else "") + f", e.g. {name}={example}")


@dataclass(frozen=True)
class RunSettings:
    """What a check or a run is run with (the same in every worker).

    Parameters
    ----------
    examples : int or None
        Cases to draw per target (per row of a run); None: the active
        Hypothesis profile's ``max_examples``.
    seed : int or None
        Hypothesis seed (0: the same cases every run); None draws at random.
    store : path or None
        Folder for the repros of failures; None saves none.
    isolate : bool or None
        Run kernels in a worker process (:mod:`numoracle.checking.isolate`);
        None: the caller's default (a check: in this process; ``numoracle
        run``: isolated unless the target is built in).
    timeout : float or None
        Seconds a kernel may take on one case before it counts as hung.
    diagnose : bool
        Judge every case under every candidate model too.
    shrink : bool
        Shrink a failure to a minimal case.
    shrink_seconds : float or None
        Cap on shrinking one failure; None: a share of the budget
        (:attr:`shrink_cap`), or no cap without a budget.
    budget : float or None
        Seconds for the whole run (``--budget``); None: no limit.
    min_cases : int
        Cases every row of a run gets before any row gets more.
    """

    examples: int | None = None
    seed: int | None = 0
    store: Path | str | None = DEFAULT_STORE
    isolate: bool | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    diagnose: bool = False
    shrink: bool = True
    shrink_seconds: float | None = None
    budget: float | None = None
    min_cases: int = MIN_CASES

    _profiles: ClassVar[dict[str, RunSettings]] = {}
    _loaded: ClassVar[list[str]] = [DEFAULT_PROFILE]

    def __post_init__(self) -> None:
        _positive("examples", self.examples, "100", integer=True)
        if self.seed is not None and (isinstance(self.seed, bool)
                                      or not isinstance(self.seed, int)):
            raise InvalidArgument(f"seed={self.seed!r} must be an int, or None for a random run")
        if self.store is not None and not isinstance(self.store, (str, Path)):
            raise InvalidArgument(f"store={self.store!r} must be a folder (str or Path) for "
                                  "the repros, or None to save none")
        if self.isolate not in (None, True, False):
            raise InvalidArgument(f"isolate={self.isolate!r} must be True (run the kernel in a "
                                  "worker process), False or None (the default)")
        _positive("timeout", self.timeout, "10")
        for flag in ("diagnose", "shrink"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidArgument(f"{flag}={getattr(self, flag)!r} must be True or False")
        if self.shrink_seconds is not None and (
                isinstance(self.shrink_seconds, bool)
                or not isinstance(self.shrink_seconds, (int, float)) or self.shrink_seconds < 0):
            raise InvalidArgument(f"shrink_seconds={self.shrink_seconds!r} must be a number of "
                                  "seconds >= 0, or None (a share of the budget)")
        _positive("budget", self.budget, "60")
        _positive("min_cases", self.min_cases, str(MIN_CASES), optional=False, integer=True)

    def replace(self, **changes: Any) -> RunSettings:
        """A copy with fields changed (checked as a new one is).

        Raises
        ------
        InvalidArgument
            For a name that is not a field, or a value the field refuses.
        """
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise InvalidArgument(f"{unknown} are not run settings; the settings are "
                                  f"{list(self.field_names())}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the settings, in order."""
        return tuple(f.name for f in fields(cls))

    # -- profiles -----------------------------------------------------------------------

    @classmethod
    def register_profile(cls, name: str, parent: RunSettings | None = None,
                         **changes: Any) -> None:
        """Name settings: ``parent`` (default: the built-in defaults) with ``changes``."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"profile name {name!r} must be a non-empty str")
        cls._profiles[name] = (parent if parent is not None else cls()).replace(**changes)

    @classmethod
    def get_profile(cls, name: str) -> RunSettings:
        """The settings registered as ``name``.

        Raises
        ------
        InvalidArgument
            Naming the profiles there are.
        """
        try:
            return cls._profiles[name]
        except (KeyError, TypeError):
            raise InvalidArgument(f"profile {name!r} is not registered; register it with "
                                  "RunSettings.register_profile(name, ...), or use one of "
                                  f"{sorted(cls._profiles)}") from None

    @classmethod
    def load_profile(cls, name: str) -> None:
        """Make profile ``name`` the one :meth:`default` returns."""
        cls.get_profile(name)
        cls._loaded[0] = name

    @classmethod
    def loaded_profile(cls) -> str:
        """The name of the profile :meth:`default` returns."""
        return cls._loaded[0]

    @classmethod
    def default(cls) -> RunSettings:
        """The settings of the loaded profile: what a check takes where no
        argument says otherwise."""
        return cls.get_profile(cls._loaded[0])

    # -- the budget ---------------------------------------------------------------------

    def deadline(self, start: float) -> float | None:
        """When a run that starts at ``start`` (a clock's seconds) must end judging."""
        return None if self.budget is None else start + self.budget

    def judging_seconds(self, pictures: int = 0) -> float | None:
        """Seconds of the budget left for judging once the report's share is kept:
        :data:`REPORT_RESERVE` of it plus time for ``pictures`` report pictures,
        at most a fifth of it; None without a budget."""
        if self.budget is None:
            return None
        kept = min(REPORT_RESERVE * self.budget + _PICTURE_SECONDS * pictures,
                   _REPORT_MOST * self.budget)
        return self.budget - kept

    @property
    def shrink_cap(self) -> float | None:
        """Seconds shrinking one failure may take: ``shrink_seconds`` when given,
        else :data:`SHRINK_SHARE` of the budget (at least 1 s), else no cap."""
        if self.shrink_seconds is not None:
            return float(self.shrink_seconds)
        if self.budget is None:
            return None
        return max(SHRINK_SHARE * self.budget, 1.0)

    @property
    def shrink_grace(self) -> float:
        """Seconds past the end of judging that shrinking may still use: the
        report's share of the budget (0 without a budget)."""
        return 0.0 if self.budget is None else REPORT_RESERVE * self.budget


RunSettings.register_profile(DEFAULT_PROFILE)
