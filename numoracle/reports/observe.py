"""Hypothesis observability records of a run, for Tyche.

Hypothesis writes one JSON line per test case (status, representation,
timing, features) to ``.hypothesis/observed/<date>_testcases.jsonl`` when its
observability is on; Tyche (the VS Code extension) reads that folder and shows
the distribution of the cases. The documented switch is the environment
variable ``HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY``, read when Hypothesis is
imported; :func:`observing` turns the same writer on for one run of an already
imported Hypothesis, through its callback list (``add_observability_callback``
in newer releases, the ``TESTCASE_CALLBACKS`` list in older ones), with
Hypothesis's own file writer, so the records are exactly those the
environment variable gives. The runner adds
features of its own to every case (:func:`case_features`: op, value family,
storage, reduction length, verdict) through ``hypothesis.event``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["observing", "enabled", "case_features", "observed_dir"]

_ACTIVE = [False]


def enabled() -> bool:
    """Whether observability records are being written (by :func:`observing` or
    because ``HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY`` was set)."""
    return _ACTIVE[0] or "HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY" in os.environ


def observed_dir() -> Path:
    """Where Hypothesis writes its observability records (``.hypothesis/observed``
    under the current directory, or under ``HYPOTHESIS_STORAGE_DIRECTORY``)."""
    from hypothesis.configuration import storage_directory  # noqa: PLC0415 - lazy

    d: Any = storage_directory("observed")
    return Path(getattr(d, "path", d))


@contextmanager
def observing(on: bool = True) -> Iterator[Path | None]:
    """Write Hypothesis observability records while the block runs.

    Yields the folder the records go to (None when ``on`` is false). Where
    ``HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY`` is set, Hypothesis writes them
    already and nothing is added.

    Examples
    --------
    >>> with observing(False) as folder:
    ...     print(folder)
    None
    """
    if not on:
        yield None
        return
    from hypothesis.internal import observability as obs  # noqa: PLC0415 - only when asked

    folder = observed_dir()
    if "HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY" in os.environ:
        yield folder  # Hypothesis registered its own writer at import
        return
    writer = obs._deliver_to_file  # Hypothesis's own writer: the format Tyche reads
    add = getattr(obs, "add_observability_callback", None)
    _ACTIVE[0] = True
    try:
        if add is not None:  # the writer takes (observation, thread id) where it can
            if len(inspect.signature(writer).parameters) >= 2:
                add(writer, all_threads=True)
            else:
                add(writer)
            try:
                yield folder
            finally:
                obs.remove_observability_callback(writer)
        else:  # older Hypothesis: a plain list of callbacks
            obs.TESTCASE_CALLBACKS.append(writer)
            try:
                yield folder
            finally:
                obs.TESTCASE_CALLBACKS.remove(writer)
    finally:
        _ACTIVE[0] = False


def case_features(verdict: Any) -> dict[str, str]:
    """Features of one judged case for the observability record: op, storage,
    value family, the reduction length in octaves, the verdict.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> case = NS(op="linear", storage="fp32", family="exact")
    >>> out = NS(n=300)
    >>> v = NS(case=case, outputs={"y": out}, passed=True)
    >>> case_features(v)["n"]
    '2^8..2^9'
    """
    n = max((o.n for o in verdict.outputs.values()), default=0)
    octave = max(n, 1).bit_length() - 1
    return {"op": verdict.case.op, "storage": verdict.case.storage,
            "family": verdict.case.family, "n": f"2^{octave}..2^{octave + 1}",
            "verdict": "pass" if verdict.passed else "fail"}
