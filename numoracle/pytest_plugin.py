"""The pytest plugin: markers, Hypothesis profiles, GPU pinning, a run summary.

Installed with numoracle (entry point ``pytest11``), or loaded by hand with
``-p numoracle``. It

* registers the markers ``gpu`` (needs a CUDA GPU) and ``slow``, and skips
  ``gpu`` tests where neither torch nor cupy sees a CUDA device;
* registers the Hypothesis profiles below and loads one: the one named by
  ``--hypothesis-profile`` (Hypothesis' own option), else ``NUMORACLE_PROFILE``,
  else ``ci`` where the ``CI`` variable is set and ``dev`` elsewhere (unless a
  conftest has already loaded a profile of its own);
* under pytest-xdist pins each worker ``gwN`` to GPU ``N mod count`` through
  ``CUDA_VISIBLE_DEVICES``, before anything initialises CUDA, when several
  GPUs are visible and the variable is not set already;
* prints, at the end of the run, what the numoracle checks of the session
  found per target: checks, cases, failures, worst ratio (gathered from the
  xdist workers too), and the stored repros replayed before new cases were
  drawn (every check replays its target's repros from the store first, as
  Hypothesis replays its example database), naming those fixed;
* provides the fixture ``numoracle_check``: :func:`numoracle.check_kernel`;
* takes ``--numoracle-isolate`` (every check of the session runs its kernel in
  a worker process: a crash fails the check instead of ending pytest) and
  ``--numoracle-timeout SECONDS`` (how long a kernel may take on one case).

Profiles
--------
``dev``       max_examples 50
``ci``        derandomize, max_examples 100, no deadline, print_blob
``thorough``  max_examples 2000, no deadline
``gpu``       max_examples 200, no deadline (first CUDA calls compile kernels)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings
from hypothesis.errors import InvalidArgument

from .api import GPU_BACKENDS, add_listener, check_kernel, remove_listener
from .checking.message import fmt_ratio
from .running.devices import nvidia_gpu_count
from .settings import RunSettings

if TYPE_CHECKING:
    from .running.runner import TargetResult

__all__ = ["PROFILES", "choose_profile", "gpu_count", "pin_worker_gpu", "RunSummary"]

PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 50},
    "ci": {"derandomize": True, "max_examples": 100, "deadline": None, "print_blob": True},
    "thorough": {"max_examples": 2000, "deadline": None},
    "gpu": {"max_examples": 200, "deadline": None},
}
PROFILE_ENV = "NUMORACLE_PROFILE"

# Registered when the plugin is imported, before any pytest_configure, so that
# Hypothesis' own plugin finds them when it loads --hypothesis-profile. A
# conftest that registers a profile of the same name later wins.
for _name, _values in PROFILES.items():
    settings.register_profile(_name, **_values)


# -- profiles ---------------------------------------------------------------------------


def choose_profile(option: str | None, env: Mapping[str, str]) -> str | None:
    """The profile to load: None when ``--hypothesis-profile`` named one (Hypothesis
    loads it), else ``NUMORACLE_PROFILE``, else ``ci`` under CI and ``dev`` elsewhere."""
    if option:
        return None
    chosen = env.get(PROFILE_ENV) or ("ci" if env.get("CI") else "dev")
    try:
        settings.get_profile(chosen)
    except InvalidArgument:
        raise pytest.UsageError(
            f"{PROFILE_ENV}={chosen!r} names no Hypothesis profile; use one of "
            f"{sorted(PROFILES)} or register it in a conftest.py"
        ) from None
    return chosen


def _load_profile(config: pytest.Config) -> None:
    """Load the chosen profile, remembering the one before for :func:`pytest_unconfigure`."""
    option = config.getoption("--hypothesis-profile", default=None)
    chosen = choose_profile(option, os.environ)
    explicit = bool(os.environ.get(PROFILE_ENV))
    current = settings.get_current_profile_name()
    if chosen and (explicit or current == "default"):
        config.stash[_PREVIOUS_PROFILE] = current
        settings.load_profile(chosen)


# -- GPUs -------------------------------------------------------------------------------


def gpu_count() -> int:
    """GPUs the NVIDIA driver lists (``nvidia-smi -L``), without initialising CUDA;
    0 where there is no driver."""
    return nvidia_gpu_count()


def pin_worker_gpu(env: MutableMapping[str, str],
                   count: Callable[[], int] = gpu_count) -> str | None:
    """Pin the xdist worker ``gwN`` to GPU ``N mod count`` by setting
    ``CUDA_VISIBLE_DEVICES`` in ``env``; returns the device set, or None when
    not a worker, the variable is already set, or fewer than two GPUs exist."""
    worker = re.fullmatch(r"gw(\d+)", env.get("PYTEST_XDIST_WORKER", ""))
    if worker is None or "CUDA_VISIBLE_DEVICES" in env:
        return None
    n = count()
    if n < 2:
        return None
    device = str(int(worker.group(1)) % n)
    env["CUDA_VISIBLE_DEVICES"] = device
    return device


def _gpu_unavailable_reason() -> str | None:
    """None when torch or cupy sees a CUDA device, else why neither does."""
    from .targets.backends import get_backend  # noqa: PLC0415 - only when gpu tests exist

    reasons = []
    for name in GPU_BACKENDS:
        reason = get_backend(name).available()
        if reason is None:
            return None
        reasons.append(f"{name}: {reason}")
    return "needs a CUDA GPU; " + "; ".join(reasons)


# -- the run summary --------------------------------------------------------------------

_ROW_KEYS = ("target", "op", "checks", "cases", "failures", "worst_ratio")


class RunSummary:
    """Per (target, op): checks made, cases, failures and the worst ratio."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, result: TargetResult) -> None:
        """A :func:`~numoracle.check_kernel` listener."""
        self.merge([{"target": result.target, "op": result.op, "checks": 1,
                     "cases": result.cases, "failures": result.failures,
                     "worst_ratio": result.worst_ratio, "replayed": result.replayed,
                     "fixed": list(result.fixed)}])

    def merge(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add rows of another summary (an xdist worker's)."""
        for r in rows:
            key = (str(r["target"]), str(r["op"]))
            mine = self.rows.setdefault(key, {"target": key[0], "op": key[1], "checks": 0,
                                              "cases": 0, "failures": 0, "worst_ratio": 0.0,
                                              "replayed": 0, "fixed": []})
            for k in ("checks", "cases", "failures", "replayed"):
                mine[k] += int(r.get(k, 0))
            mine["fixed"] = sorted({*mine["fixed"], *r.get("fixed", ())})
            mine["worst_ratio"] = max(mine["worst_ratio"], float(r["worst_ratio"]))

    def lines(self) -> list[str]:
        """The summary as aligned text lines, a header first."""
        head = ("target", "op", "checks", "cases", "failures", "worst ratio")
        body = [(r["target"], r["op"], str(r["checks"]), str(r["cases"]), str(r["failures"]),
                 fmt_ratio(r["worst_ratio"])) for _, r in sorted(self.rows.items())]
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        return ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                          for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                for row in [head, *body]]


    def store_lines(self) -> list[str]:
        """The stored repros replayed before drawing, and those fixed (passing now)."""
        replayed = sum(r["replayed"] for r in self.rows.values())
        if not replayed:
            return []
        fixed = [p for r in self.rows.values() for p in r["fixed"]]
        lines = [f"stored repros replayed first: {replayed}; fixed (pass now): {len(fixed)}"]
        lines += [f"  fixed: {p}  (numoracle store prune --fixed removes it)" for p in fixed]
        return lines


_SUMMARY = pytest.StashKey[RunSummary]()
_PREVIOUS_PROFILE = pytest.StashKey[str]()
_PREVIOUS_SETTINGS = pytest.StashKey[str]()
#: the run-settings profile ``--numoracle-isolate`` / ``--numoracle-timeout`` load
SESSION_PROFILE = "pytest-session"


# -- hooks --------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("numoracle")
    group.addoption("--numoracle-isolate", action="store_true", default=False,
                    help="run the kernels of numoracle checks in a worker process, so that a "
                         "segfault, abort or exit fails the check instead of ending pytest")
    group.addoption("--numoracle-timeout", type=float, default=None, metavar="SECONDS",
                    help="seconds a kernel may take on one case before it counts as hung "
                         f"(default {RunSettings.default().timeout:g})")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    pin_worker_gpu(os.environ)
    _load_profile(config)
    changes: dict[str, Any] = {}
    if config.getoption("--numoracle-isolate", default=False):
        changes["isolate"] = True
    timeout = config.getoption("--numoracle-timeout", default=None)
    if timeout is not None:
        if not timeout > 0:
            raise pytest.UsageError(f"--numoracle-timeout {timeout:g} must be a positive "
                                    "number of seconds, e.g. --numoracle-timeout 30")
        changes["timeout"] = timeout
    if changes:  # a profile of the session's own, the one before put back at the end
        config.stash[_PREVIOUS_SETTINGS] = RunSettings.loaded_profile()
        RunSettings.register_profile(SESSION_PROFILE, RunSettings.default(), **changes)
        RunSettings.load_profile(SESSION_PROFILE)
    summary = RunSummary()
    config.stash[_SUMMARY] = summary
    add_listener(summary.add)


def pytest_unconfigure(config: pytest.Config) -> None:
    summary = config.stash.get(_SUMMARY, None)
    if summary is not None:
        remove_listener(summary.add)
    previous = config.stash.get(_PREVIOUS_PROFILE, None)
    if previous is not None:
        settings.load_profile(previous)
    before = config.stash.get(_PREVIOUS_SETTINGS, None)
    if before is not None:
        RunSettings.load_profile(before)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _gpu_unavailable_reason()
    if reason is not None:
        skip = pytest.mark.skip(reason=reason)
        for item in gpu_items:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    summary = session.config.stash.get(_SUMMARY, None)
    if workeroutput is not None and summary is not None:
        workeroutput["numoracle_summary"] = list(summary.rows.values())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist, on the controller: take in a finished worker's summary."""
    summary = node.config.stash.get(_SUMMARY, None)
    rows = getattr(node, "workeroutput", {}).get("numoracle_summary")
    if summary is not None and rows:
        summary.merge(rows)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    summary = config.stash.get(_SUMMARY, None)
    if summary is None or not summary.rows:
        return
    terminalreporter.write_sep("-", "numoracle checks")
    for line in summary.lines():
        terminalreporter.write_line(line)
    for line in summary.store_lines():
        terminalreporter.write_line(line)


@pytest.fixture
def numoracle_check() -> Callable[..., TargetResult]:
    """:func:`numoracle.check_kernel`, for tests that check a kernel inline."""
    return check_kernel
