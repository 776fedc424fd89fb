"""Sweeps beyond one machine: a run's work as Ray tasks.

A run's work — targets × ops × blocks of Hypothesis seeds — becomes Ray
tasks, one per block; a task asks for a GPU where its target needs one
(``torch-cuda`` and ``cupy`` backends), runs on whichever node the cluster
has free, and its result streams back as it finishes. The blocks of one
target merge into one :class:`~numoracle.running.runner.TargetResult`, so the
report (``report.json``, the table) reads as a local run's.

- **Seeds and cases.** Block 0 uses the run's seed itself; block ``i`` uses
  :func:`block_seed`, a hash of the seed and ``i``. This process draws each
  block's cases with its seed (:func:`~numoracle.running.draws.draw_cases`)
  and sends them with the task; the worker judges exactly those, in order,
  so a block's cases do not depend on the node that runs it.
- **Failures.** A failing case is shrunk on the worker that found it (by
  :func:`numoracle.checking.shrink.shrink`, as a case given from outside); its
  repro folder comes home as bytes and is saved in the local store. Once a
  target fails (or turns out unavailable), no further block of it starts,
  as a local run stops at its first failure; blocks under way finish.
- **Faults.** A worker that dies or a node that leaves: Ray runs the block
  again elsewhere (``max_retries``). A block that runs past ``task_timeout``
  is cancelled (its worker killed) and, like a block whose retries are
  spent, reported as *unjudged* with its seed block: a row of its own in
  the report, verdict ``"unjudged"``. Blocks already judged are kept.

Ray is an optional extra (``pip install 'numoracle[ray]'``); this module
imports it only when a run starts.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cases.case import Case
from ..errors import InvalidArgument
from ..outcome import RunVerdict
from ..settings import RunSettings
from ..targets.target import Target
from .blocks import block_seed, merge_results
from .draws import case_digest, draw_cases
from .runner import TargetResult

__all__ = ["run_cluster", "ClusterRun", "Block", "BlockOutcome", "UnjudgedResult",
           "block_seed", "plan_blocks", "merge_blocks", "needs_gpu",
           "DEFAULT_BLOCK", "DEFAULT_TASK_TIMEOUT", "cluster_results"]

#: cases per block (one Ray task) unless told otherwise
DEFAULT_BLOCK = 200
#: cases per target where the settings leave ``examples`` to the caller
CLUSTER_EXAMPLES = 2000
#: seconds a block may run (from its submission) before it is cancelled as hung
DEFAULT_TASK_TIMEOUT = 900.0


def needs_gpu(target: Target) -> bool:
    """Whether ``target``'s kernel runs on a GPU (its blocks ask Ray for one)."""
    return target.on_gpu


@dataclass(frozen=True)
class Block:
    """One Ray task's work: ``examples`` cases of one target, drawn with ``seed``."""

    target: str
    op: str
    index: int
    seed: int
    examples: int

    def describe(self) -> str:
        return (f"seed block {self.index} of {self.target} on {self.op} "
                f"(seed {self.seed}, {self.examples} cases)")


def plan_blocks(targets: Sequence[Target], examples: int, seed: int,
                block_size: int) -> list[Block]:
    """Every target's ``examples`` cases cut into blocks of ``block_size``,
    ordered block index first (every target advances from the start)."""
    if block_size < 1:
        raise InvalidArgument(f"block_size={block_size!r} must be a positive int; give e.g. "
                              f"{DEFAULT_BLOCK}")
    n_blocks = -(-examples // block_size)
    return [Block(t.name, t.op, i, block_seed(seed, i),
                  min(block_size, examples - i * block_size))
            for i in range(n_blocks) for t in targets]


@dataclass
class BlockOutcome:
    """What came back for one block: its result (None when unjudged)."""

    block: Block
    result: TargetResult | None
    host: str = ""
    reason: str = ""
    #: digests of the cases judged, in order (only with ``record_cases``)
    cases: list[str] = field(default_factory=list)


@dataclass
class UnjudgedResult(TargetResult):
    """A block that was not judged: its worker died past its retries, it hung
    past the task timeout, or its task raised. Its row names the seed block."""

    block_index: int = 0
    block_seed: int = 0
    block_examples: int = 0

    def row(self) -> dict[str, Any]:
        row = super().row()
        row["status"] = "unjudged"
        row["seed_block"] = {"index": self.block_index, "seed": self.block_seed,
                             "examples": self.block_examples}
        return row


@dataclass
class ClusterRun:
    """A cluster run: the merged results (the report's rows, in target order,
    unjudged blocks after their target) and every block's outcome."""

    results: list[TargetResult]
    outcomes: list[BlockOutcome]
    seconds: float = 0.0

    @property
    def unjudged(self) -> list[UnjudgedResult]:
        return [r for r in self.results if isinstance(r, UnjudgedResult)]

    def rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.results]

    def cases(self) -> int:
        return sum(r.cases for r in self.results)

    def hosts(self) -> set[str]:
        return {o.host for o in self.outcomes if o.host}


# --------------------------------------------------------------------------- worker side


def _run_block(target: Target, cases: list[Case], settings: RunSettings,
               seconds: float | None, record_cases: bool) -> dict[str, Any]:
    """The body of a block's Ray task: run_target on the block's cases (drawn
    by the driver) into a scratch store; the repro, if any, comes back as its
    files' bytes."""
    from .runner import run_target  # noqa: PLC0415 - a fresh worker imports it here

    digests: list[str] = []

    def on_case(v: Any) -> None:
        digests.append(case_digest(v.case))

    scratch = tempfile.mkdtemp(prefix="numoracle-block-")
    try:
        res = run_target(target, settings, cases=cases, store=scratch, seconds=seconds,
                         on_case=on_case if record_cases else None)
        repro = None
        if res.repro:
            folder = Path(res.repro)
            repro = (folder.name, res.repro,
                     {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"result": res, "repro": repro, "host": socket.gethostname(), "pid": os.getpid(),
            "cases": digests}


def _save_returned_repro(name: str, files: dict[str, bytes], store: Path | str) -> Path:
    """Write a repro folder that came home from a worker into the local store,
    in :func:`numoracle.store.repro.save_repro`'s format (the one coupling to
    the store)."""
    folder = Path(store) / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, data in files.items():
        (folder / fname).write_bytes(data)
    return folder


# --------------------------------------------------------------------------- merging


def merge_blocks(target: Target, outcomes: Sequence[BlockOutcome]) -> list[TargetResult]:
    """One target's block outcomes as report results: the judged blocks merged
    (cases summed, worst ratio the max, samples concatenated, the first
    failure by block index kept) — omitted when none was judged — followed by
    one :class:`UnjudgedResult` per unjudged block."""
    merged = TargetResult(target.name, target.op, target.precision.name)
    judged = sorted((o for o in outcomes if o.result is not None), key=lambda o: o.block.index)
    results = [o.result for o in judged if o.result is not None]
    skipped = [r for r in results if r.verdict is RunVerdict.SKIPPED]
    ran = [r for r in results if r.verdict is not RunVerdict.SKIPPED]
    out: list[TargetResult] = []
    if skipped and not ran:
        merged.verdict, merged.diagnosis = RunVerdict.SKIPPED, skipped[0].diagnosis
        out.append(merged)
    elif ran:
        merged = merge_results(ran)
        out.append(merged)
    for o in sorted((o for o in outcomes if o.result is None), key=lambda o: o.block.index):
        b = o.block
        out.append(UnjudgedResult(target.name, target.op, target.precision.name,
                                  verdict=RunVerdict.UNJUDGED,
                                  diagnosis=f"{o.reason}; not judged: {b.describe()}",
                                  block_index=b.index, block_seed=b.seed,
                                  block_examples=b.examples))
    return out


# --------------------------------------------------------------------------- driver side


def _ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - an optional extra, imported only for cluster runs
    except ImportError:
        raise InvalidArgument("a cluster run needs Ray, which is not installed here; install "
                              "it with `pip install 'numoracle[ray]'` (or `pip install ray`)"
                              ) from None
    return ray


def _connect(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Join the cluster at ``address`` (``"local"``: start one on this machine);
    returns whether this call started Ray (and so must shut it down)."""
    if ray.is_initialized():
        return False
    if address in (None, "local"):
        cpus = num_cpus if num_cpus is not None else (os.cpu_count() or 1)
        ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=256 * 2**20,
                 logging_level="warning")
    else:
        host, _, port = address.rpartition(":")
        if host and port.isdigit() and "://" not in address:  # HOST:PORT of a head's GCS
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
            except OSError as exc:  # Ray itself would keep trying for minutes
                raise InvalidArgument(
                    f"--cluster {address!r}: nothing answers there ({exc}); give the address "
                    "`ray start --head` printed (HOST:6379), 'auto', ray://HOST:10001 or "
                    "'local'") from None
        try:
            ray.init(address=address, logging_level="warning")
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InvalidArgument(
                f"--cluster {address!r}: no Ray cluster could be joined there ({exc}); give "
                "'local' (Ray on this machine), 'auto' (a cluster this machine belongs to, "
                "started with `ray start`) or ray://HOST:10001") from None
    return True


def run_cluster(
    targets: Sequence[Target],
    settings: RunSettings | None = None,
    *,
    address: str | None = "local",
    block_size: int = DEFAULT_BLOCK,
    task_timeout: float = DEFAULT_TASK_TIMEOUT,
    max_retries: int = 3,
    num_cpus: int | None = None,
    gpus_per_task: float = 1.0,
    record_cases: bool = False,
    on_block: Callable[[BlockOutcome], None] | None = None,
    **changes: Any,
) -> ClusterRun:
    """Run ``targets`` on a Ray cluster, block by block; merge what comes back.

    Parameters
    ----------
    targets : sequence of Target
        The kernels under test (pickled to the workers; a built-in target
        travels by reference, so numoracle must be installed on every node).
    address : str or None
        ``"local"`` (or None) starts Ray on this machine; otherwise a Ray
        address (``"auto"``, ``"ray://host:10001"``). Where Ray is already
        initialised in this process, that instance is used.
    settings : RunSettings, optional
        How the run is run (default: the loaded profile's,
        :meth:`~numoracle.settings.RunSettings.default`): ``examples`` per
        target (None: :data:`CLUSTER_EXAMPLES`), cut into blocks of
        ``block_size``; the run's ``seed`` (block ``i``'s cases are drawn here
        with :func:`block_seed` ``(seed, i)`` and sent with its task); the
        local ``store`` where the repros of failures are saved; the
        ``timeout`` of a kernel on one case (judged as hung: a failing
        verdict); ``shrink`` and ``diagnose`` as for
        :func:`~numoracle.running.runner.run_target`; the ``budget``, seconds
        for the whole run: no block starts after it, and a block stops
        drawing cases once the budget left at its start is spent.
    **changes
        Fields of ``settings`` changed for this run.
    block_size : int
        Cases per block: one Ray task, retried or reported unjudged as a whole.
    task_timeout : float
        Seconds a block may take from its submission before it is cancelled
        (``ray.cancel(force=True)``) and reported unjudged.
    max_retries : int
        Times Ray runs a block again after its worker died or its node left.
    num_cpus : int or None
        CPUs of a ``"local"`` instance (default: all of this machine's).
    gpus_per_task : float
        GPUs a block of a GPU target asks for (a fraction shares a GPU).
    record_cases : bool
        Keep a digest of every case judged (:attr:`BlockOutcome.cases`).
    on_block : callable, optional
        Called with each :class:`BlockOutcome` as it arrives (progress).

    Returns
    -------
    ClusterRun
        The merged results in target order, and every block's outcome.
    """
    run = (settings if settings is not None else RunSettings.default()).replace(**changes)
    if task_timeout <= 0:
        raise InvalidArgument(f"task_timeout={task_timeout!r} must be positive; give e.g. 900")
    if gpus_per_task <= 0 or (gpus_per_task > 1 and gpus_per_task != int(gpus_per_task)):
        raise InvalidArgument(f"gpus_per_task={gpus_per_task!r} must be a fraction in (0, 1] "
                              "or a whole number; give e.g. 1 or 0.5")
    ray = _ray()
    t0 = time.perf_counter()
    end = run.deadline(t0)
    started = _connect(ray, address, num_cpus)
    try:
        outcomes = _schedule(ray, targets, run, block_size=block_size,
                             task_timeout=task_timeout, max_retries=max_retries, end=end,
                             gpus_per_task=gpus_per_task, record_cases=record_cases,
                             on_block=on_block, address=address)
    finally:
        if started:
            ray.shutdown()
    results: list[TargetResult] = []
    for t in targets:
        results.extend(merge_blocks(t, [o for o in outcomes
                                        if (o.block.target, o.block.op) == (t.name, t.op)]))
    return ClusterRun(results, outcomes, time.perf_counter() - t0)


def _schedule(ray: Any, targets: Sequence[Target], run: RunSettings, *,
              block_size: int, task_timeout: float, max_retries: int, end: float | None,
              gpus_per_task: float, record_cases: bool,
              on_block: Callable[[BlockOutcome], None] | None,
              address: str | None) -> list[BlockOutcome]:
    """Submit blocks while the cluster has room, collect them as they finish,
    cancel those past their timeout."""
    examples = run.examples if run.examples is not None else CLUSTER_EXAMPLES
    seed, store = run.seed or 0, run.store
    resources = ray.cluster_resources()
    cpu_slots = max(int(resources.get("CPU", 1)), 1)
    gpu_slots = int(resources.get("GPU", 0) / gpus_per_task)
    by_key = {(t.name, t.op): t for t in targets}
    outcomes: list[BlockOutcome] = []

    def finish(o: BlockOutcome) -> None:
        outcomes.append(o)
        if on_block is not None:
            on_block(o)

    runnable: list[Target] = []
    for t in targets:
        reason = None
        if needs_gpu(t) and gpu_slots < 1:
            reason = (f"needs a GPU; the Ray cluster at {address or 'local'} has "
                      f"{resources.get('GPU', 0):g}")
        elif not needs_gpu(t):
            reason = t.unavailable_reason()  # CPU targets: the nodes are set up as this one
        if reason is not None:
            skip = TargetResult(t.name, t.op, t.precision.name, verdict=RunVerdict.SKIPPED,
                                diagnosis=reason)
            finish(BlockOutcome(Block(t.name, t.op, 0, seed, 0), skip))
        else:
            runnable.append(t)
    queues: dict[bool, deque[Block]] = {False: deque(), True: deque()}
    for b in plan_blocks(runnable, examples, seed, block_size):
        queues[needs_gpu(by_key[(b.target, b.op)])].append(b)
    remote = ray.remote(_run_block)
    refs = {(t.name, t.op): ray.put(t) for t in runnable}
    stopped: set[tuple[str, str]] = set()  # failed or unavailable: start no more blocks
    pending: dict[Any, tuple[Block, float]] = {}
    in_flight = {False: 0, True: 0}
    limits = {False: cpu_slots, True: min(gpu_slots, cpu_slots)}

    while True:
        now = time.perf_counter()
        if end is not None and now >= end:
            queues[False].clear()
            queues[True].clear()  # the budget is spent: no block starts any more
        for gpu in (True, False):
            q = queues[gpu]
            while q and in_flight[gpu] < limits[gpu] and \
                    in_flight[True] + in_flight[False] < cpu_slots:
                b = q.popleft()
                if (b.target, b.op) in stopped:
                    continue
                opts: dict[str, Any] = {"num_cpus": 1, "max_retries": max_retries,
                                        "retry_exceptions": False}
                if gpu:
                    opts["num_gpus"] = gpus_per_task
                cases = draw_cases(by_key[(b.target, b.op)], b.examples, b.seed)
                left = None if end is None else max(end - time.perf_counter(), 0.0)
                ref = remote.options(**opts).remote(refs[(b.target, b.op)], cases, run, left,
                                                    record_cases)
                pending[ref] = (b, time.perf_counter())
                in_flight[gpu] += 1
        if not pending:
            break
        now = time.perf_counter()
        next_deadline = min(t + task_timeout for _, t in pending.values())
        wait_s = min(max(next_deadline - now, 0.0), 1.0)
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
        for ref in ready:
            b, _t = pending.pop(ref)
            in_flight[needs_gpu(by_key[(b.target, b.op)])] -= 1
            try:
                got = ray.get(ref)
            except ray.exceptions.RayError as exc:  # died past its retries, or raised
                finish(BlockOutcome(b, None, reason=_fault(exc, max_retries)))
                continue
            res: TargetResult = got["result"]
            if got["repro"] is not None and store is not None:
                name, remote_path, files = got["repro"]
                local = str(_save_returned_repro(name, files, store))
                res.repro = local
                res.message = res.message.replace(remote_path, local)
            if res.verdict in (RunVerdict.FAIL, RunVerdict.SKIPPED):
                stopped.add((b.target, b.op))
            finish(BlockOutcome(b, res, host=got["host"], cases=got["cases"]))
        now = time.perf_counter()
        for ref, (b, submitted) in list(pending.items()):
            if now - submitted > task_timeout:
                ray.cancel(ref, force=True)  # kills its worker; Ray does not retry it
                del pending[ref]
                in_flight[needs_gpu(by_key[(b.target, b.op)])] -= 1
                finish(BlockOutcome(b, None, reason=f"the block ran past its task timeout "
                                                    f"of {task_timeout:g} s and was cancelled "
                                                    "(a hung kernel?)"))
    return outcomes


def _fault(exc: Exception, max_retries: int) -> str:
    name = type(exc).__name__
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if "WorkerCrashed" in name or "NodeDied" in name or "ActorDied" in name \
            or "OutOfMemory" in name:
        return f"its worker died {max_retries + 1} times ({name}: {first})"
    return f"its task raised {name}: {first}"


# --------------------------------------------------------------------------- command line


def cluster_results(targets: Sequence[Target], settings: RunSettings, console: Any, *,
                    address: str, block_size: int | None = None,
                    task_timeout: float | None = None) -> list[TargetResult]:
    """``numoracle run --cluster``: :func:`run_cluster` with a progress bar per
    target and op; the results as :func:`numoracle.cli._common.run_all` returns them."""
    from rich.progress import (  # noqa: PLC0415 - only the command line shows progress
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        bars = {(t.name, t.op): progress.add_task(f"{t.name} {t.op}", total=settings.examples)
                for t in targets}

        def on_block(o: BlockOutcome) -> None:
            key = (o.block.target, o.block.op)
            if o.result is None:
                console.print(f"unjudged: {o.block.describe()}: {o.reason}", markup=False,
                              highlight=False, style="red")
            elif o.result.verdict is RunVerdict.FAIL:
                progress.update(bars[key], description=f"{key[0]} {key[1]}: FAIL")
            progress.advance(bars[key], o.result.cases if o.result else 0)

        run = run_cluster(targets, settings, address=address,
                          block_size=block_size or DEFAULT_BLOCK,
                          task_timeout=task_timeout or DEFAULT_TASK_TIMEOUT, on_block=on_block)
    hosts = run.hosts()
    console.print(f"cluster: {run.cases()} cases in {len(run.outcomes)} blocks on "
                  f"{len(hosts)} host(s) in {run.seconds:.1f} s", markup=False, highlight=False)
    return run.results
