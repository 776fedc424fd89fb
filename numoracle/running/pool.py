"""A run's rows in worker processes, one per core (``numoracle run -j N``).

The driver deals the rows to ``jobs`` worker processes (started with
``spawn``: no inherited CUDA or thread state), balancing their weights. Each
worker warms its targets up, says so, and waits; once every worker is warm
the driver starts the clock and every worker judges its rows with
:func:`~numoracle.running.schedule.judge_rows` in the time given, streaming
each case (for the progress bars) and each row's result back through a pipe.
Where the host has several GPUs (:func:`~numoracle.running.devices.gpu_devices`)
the workers form a pool per GPU: worker ``w`` is pinned to GPU ``w mod GPUs``
through ``CUDA_VISIBLE_DEVICES`` (set before it imports anything), and the
rows whose target runs on a GPU are dealt so that every GPU gets its share
of them.

Each worker draws its own rows' cases (:class:`OwnDraws`): a process of
its own, started with the driver's modules loaded and nothing else (which
cases a seed gives may depend on the modules loaded,
:mod:`~numoracle.running.draws`), draws the chunks of the worker's blocks
ahead while the worker judges, and the worker leaves out, in order, the
cases earlier chunks of a block gave, as the driver's
:class:`~numoracle.running.schedule.RunDraws` would. The chunks depend on
the seeds alone, so the per-row cases are those of ``-j 1`` when time does
not cut a row short, whatever the number of workers; and the drawing grows
with the workers instead of waiting on the driver. Each draw process first
draws a probe chunk that the driver draws too; a worker whose probe differs
asks the driver for each chunk instead. A worker that dies leaves its rows
unjudged, with the reason.

The budget holds: no worker asks for cases past the end, a case still
running at the end plus the schedule's grace is cut (not counted, the
cases before it kept; a failure being shrunk is not cut), and the driver
stops drawing ahead at the end. :func:`run_pool` reports where the time
went (``stats``): the driver's seconds drawing, the workers' seconds
waiting for cases, and each worker's GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from .devices import VISIBLE, gpu_devices, pinned, worker_devices
from ..outcome import RunVerdict
from .draws import CHUNK, case_digest
from .runner import TargetResult
from .schedule import (
    AHEAD_CHUNKS,
    WARM_AHEAD_CHUNKS,
    Row,
    RunDraws,
    RunSettings,
    block_sizes,
    judge_rows,
    warm_up,
)

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..cases.case import Case

__all__ = ["run_pool", "default_jobs", "OwnDraws", "MEMORY_PER_WORKER"]

#: bytes of memory a worker may need (imports, the oracle's arrays): caps the default jobs
MEMORY_PER_WORKER = 3 * 2**30


def _available_memory() -> int | None:
    """Bytes of memory available here (``/proc/meminfo``), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def default_jobs(rows: int) -> int:
    """Worker processes for ``rows`` rows: the cores this process may use,
    capped by the memory available (:data:`MEMORY_PER_WORKER` each) and by the
    number of rows."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    memory = _available_memory()
    by_memory = cores if memory is None else max(memory // MEMORY_PER_WORKER, 1)
    return max(1, min(cores, by_memory, rows))


def _deal(rows: Sequence[Row], jobs: int,
          devices: Sequence[str | None] | None = None) -> list[list[int]]:
    """Row indices per worker: heaviest first to the lightest-loaded worker,
    each worker's rows kept in run order. ``devices`` gives each worker's GPU
    (None: none pinned): a row whose target runs on a GPU goes first to the
    GPU with the least GPU work dealt so far, so that every GPU gets its
    share. Workers given no row are left out (their hands are empty)."""
    load = [0.0] * jobs
    hands: list[list[int]] = [[] for _ in range(jobs)]
    gpu_load: dict[str | None, float] = {}
    devices = list(devices) if devices is not None else [None] * jobs
    for k in sorted(range(len(rows)), key=lambda k: -rows[k].weight):
        on_gpu = rows[k].target.on_gpu and devices[0] is not None

        def key(j: int, on_gpu: bool = on_gpu) -> tuple[float, float, int]:
            return (gpu_load.get(devices[j], 0.0) if on_gpu else 0.0, load[j], len(hands[j]))

        w = min(range(jobs), key=key)
        hands[w].append(k)
        load[w] += rows[k].weight
        if on_gpu:
            gpu_load[devices[w]] = gpu_load.get(devices[w], 0.0) + rows[k].weight
    return [sorted(h) for h in hands]


def _portable(row: Row) -> tuple[Any, ...]:
    """A row as the worker rebuilds it: the target itself where it pickles,
    else its registered name, op and precision model."""
    try:
        target: Any = pickle.dumps(row.target)
    except (pickle.PicklingError, AttributeError, TypeError):
        target = (row.target.name, row.target.op, row.target.precision)
    return (target, row.regime, row.weight, row.asked, row.isolate)


def _rebuild(spec: tuple[Any, ...]) -> Row:
    target, regime, weight, asked, isolate = spec
    if isinstance(target, bytes):
        t = pickle.loads(target)
    else:
        from ..kernels import get_target  # noqa: PLC0415 - the worker loads the registry

        name, op, precision = target
        t = replace(get_target(name, op), precision=precision)
    return Row(t, regime=regime, weight=weight, asked=asked, isolate=isolate)


def _import_all(modules: list[str]) -> None:
    """Import the driver's ``modules`` (Hypothesis mixes literals of the loaded
    modules into its draws)."""
    for name in modules:
        with contextlib.suppress(BaseException):  # a module that cannot load here: the probe tells
            importlib.import_module(name)


def _draw_serve(conn: Connection, modules: list[str], specs: list[tuple[Any, ...]],
                probe: tuple[Any, ...], settings: RunSettings,
                inherited: Sequence[Connection] = ()) -> None:
    """A worker's draw process: the driver's modules loaded and nothing else
    (started before its worker loads its targets' tools). For each ``(k,
    index, j)`` asked it sends the raw cases of chunk ``j`` of block
    ``index`` of row ``k`` of ``specs`` (``k = -1``: of the ``probe`` row);
    while nothing is asked it draws chunks ahead, in the order the worker's
    schedule reaches them (:meth:`RunDraws.next_ahead`), up to
    :data:`~numoracle.running.schedule.WARM_AHEAD_CHUNKS` a block beyond the
    last one asked while the worker warms up, up to
    :data:`~numoracle.running.schedule.AHEAD_CHUNKS` once it is warm (it asks
    for the probe then; chunks it may never reach would take the cores it
    judges on). It ends when the pipe closes. ``inherited``: the
    worker's pipe ends a forked process holds and closes (so that a
    worker's end shows when it is gone)."""
    for c in inherited:
        c.close()
    try:
        _import_all(modules)
        draws = RunDraws([_rebuild(spec) for spec in specs], settings)
        probe_draws = RunDraws([_rebuild(probe)], settings)
        held: dict[tuple[int, int, int], list[Case]] = {}
        drawn: dict[tuple[int, int], int] = {}  # chunks of a block drawn (ahead or asked)
        limit = WARM_AHEAD_CHUNKS  # until the worker is warm
        while True:
            if not conn.poll(0):
                nxt = draws.next_ahead(limit, drawn=lambda k, i: drawn.get((k, i), 0))
                if nxt is not None:
                    k, index, j = nxt
                    held[nxt] = draws.block(k, index).raw(j)
                    drawn[(k, index)] = j + 1
                    continue
            k, index, j = conn.recv()
            if k < 0:  # the probe: the worker is warm, only AHEAD_CHUNKS ahead from now on
                limit = AHEAD_CHUNKS
                conn.send(probe_draws.block(0, index).raw(j))
                continue
            draws.asked(k, index, j)
            drawn[(k, index)] = max(drawn.get((k, index), 0), j + 1)
            got = held.pop((k, index, j), None)
            conn.send(got if got is not None else draws.block(k, index).raw(j))
    except (EOFError, OSError, KeyboardInterrupt):
        pass
    finally:
        conn.close()


class OwnDraws:
    """A worker's own draws: a process of its own, with the driver's modules
    loaded (``modules``) and nothing else, draws the raw cases of the
    worker's rows' chunks (:meth:`~numoracle.running.draws.BlockDraws.raw`, a
    function of the seeds alone) ahead while the worker warms up and judges;
    the worker leaves out, in order, the cases earlier chunks of a block gave
    (:class:`RunDraws` ``(raw=self.get)``), as the driver would. So the
    driver draws nothing and the drawing grows with the workers.

    The process is forked from the worker before the worker rebuilds its
    rows or warms up (no CUDA or thread state yet), or spawned where ``fork``
    is not available. ``specs`` are the worker's rows (portable); ``probe``
    the row whose chunk (:meth:`get` ``(-1, index, 0)``, asked once the worker
    is warm) the driver compares with its own (where they differ the worker
    asks the driver)."""

    def __init__(self, modules: list[str], specs: list[tuple[Any, ...]], probe: tuple[Any, ...],
                 settings: RunSettings, inherited: Sequence[Connection] = ()) -> None:
        fork = "fork" in multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if fork else "spawn")
        self.conn, child = ctx.Pipe()
        closed = (*inherited, self.conn) if fork else ()
        with warnings.catch_warnings():  # no thread of this worker's touches what the child uses
            warnings.simplefilter("ignore", DeprecationWarning)
            self.process = ctx.Process(target=_draw_serve,
                                       args=(child, modules, specs, probe, settings, closed),
                                       daemon=True, name="numoracle-draws")
            self.process.start()
        child.close()

    def get(self, k: int, index: int, j: int) -> list[Case]:
        """The raw cases of chunk ``j`` of block ``index`` of row ``k``."""
        self.conn.send((k, index, j))
        while not self.conn.poll(1.0):
            if not self.process.is_alive():
                raise RuntimeError("the worker's draw process ended")
        got: list[Case] = self.conn.recv()
        return got

    def close(self) -> None:
        self.conn.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)


def _probe_block(rows: Sequence[Row], settings: RunSettings) -> int:
    """The block of row 0 whose chunk 0 probes a draw process: its largest."""
    return max(range(3), key=lambda i: block_sizes(rows[0], settings)[i])


def _driver_modules() -> list[str]:
    return sorted(n for n, m in list(sys.modules.items())
                  if n not in ("__main__", "__mp_main__") and getattr(m, "__file__", None))


class _Fetcher:
    """A worker's side of the driver's draws: chunk ``j`` of a block of one
    of its rows, asked of the driver through ``conn`` (with chunk ``j + 1``
    asked ahead where the block needs it, so that the driver draws it while
    this chunk is judged)."""

    def __init__(self, conn: Connection, index: list[int], sizes: list[list[int]]) -> None:
        self.conn, self.index, self.sizes = conn, index, sizes
        self.asked: set[tuple[int, int, int]] = set()
        self.got: dict[tuple[int, int, int], list[Case]] = {}
        self.waited = 0.0  # seconds spent waiting for the driver's chunks

    def _ask(self, key: tuple[int, int, int]) -> None:
        if key not in self.asked:
            self.asked.add(key)
            self.conn.send(("draw", *key))

    def __call__(self, i: int, block: int, j: int) -> list[Case]:
        k = self.index[i]
        size = self.sizes[i][block]
        self._ask((k, block, j))
        if (j + 1) * min(CHUNK, max(size, 1)) < size:
            self._ask((k, block, j + 1))
        t0 = time.monotonic()
        try:
            while (k, block, j) not in self.got:
                message = self.conn.recv()
                if message[0] == "chunk":
                    self.got[tuple(message[1:4])] = message[4]
        finally:
            self.waited += time.monotonic() - t0
        return self.got.pop((k, block, j))


def _worker(conn: Connection, specs: list[tuple[int, tuple[Any, ...]]],
            settings: RunSettings, own: tuple[list[str], tuple[Any, ...], int] | None) -> None:
    """A worker's life: its draw process started (``own``: the driver's
    modules, the probe's row and block; None: the driver draws), warm up,
    wait for the clock, judge, report."""
    drawer: OwnDraws | None = None
    try:
        index = [k for k, _ in specs]
        if own is not None:  # it draws ahead while this worker warms up
            modules, probe_spec, probe_block = own
            drawer = OwnDraws(modules, [s for _, s in specs], probe_spec, settings,
                              inherited=(conn,))
        rows = [_rebuild(s) for _, s in specs]
        warm = warm_up(rows, settings)
        probe = None
        if drawer is not None:  # (the chunk it was drawing ends before the clock starts)
            probe = [case_digest(c) for c in drawer.get(-1, probe_block, 0)]
        conn.send(("warm", warm, probe))
        message = conn.recv()
        if message[0] != "go":
            return
        seconds, agreed = message[1], message[2]

        def on_case(i: int, v: Any) -> None:
            conn.send(("case", index[i], bool(v.passed), case_digest(v.case)))

        def on_row(i: int, res: TargetResult) -> None:
            try:
                conn.send(("row", index[i], res))
            except (pickle.PicklingError, TypeError, AttributeError):  # a verdict that won't travel
                conn.send(("row", index[i], replace(res, failure=None)))

        if drawer is not None and not agreed:  # its draws differ from the driver's
            drawer.close()
            drawer = None
        if drawer is not None:
            mine = RunDraws(rows, settings, raw=drawer.get)
            judge_rows(rows, seconds, settings, on_case=on_case, on_row=on_row,
                       fetch=mine.chunk)
            waited = mine.seconds
        else:
            fetch = _Fetcher(conn, index, [block_sizes(r, settings) for r in rows])
            judge_rows(rows, seconds, settings, on_case=on_case, on_row=on_row, fetch=fetch)
            waited = fetch.waited
        conn.send(("done", {"waited_s": waited, "gpu": os.environ.get(VISIBLE),
                            "own_draws": drawer is not None}))
    except Exception:  # noqa: BLE001 - the driver reports it with the rows left unjudged
        conn.send(("error", traceback.format_exc()))
    finally:
        if drawer is not None:
            drawer.close()
        conn.close()


def run_pool(rows: Sequence[Row], seconds: float | None, settings: RunSettings, jobs: int, *,
             on_case: Callable[[int, bool], None] | None = None,
             on_warm: Callable[[], None] | None = None,
             warm_limit: float | None = None,
             judged: dict[int, list[str]] | None = None,
             devices: Sequence[str] | None = None,
             stats: dict[str, Any] | None = None,
             own_draws: bool = True,
             ) -> tuple[list[TargetResult], dict[str, float], float, float]:
    """Judge ``rows`` in ``jobs`` worker processes within ``seconds`` after
    their warm-up.

    Returns the results in row order, the warm-up seconds per target (the
    slowest worker's), the warm-up's wall time and the judging's wall time.
    ``on_case(row, passed)`` is called per case judged, ``on_warm()`` once
    the clock starts. A worker still warming up after ``warm_limit`` seconds,
    or that dies, leaves its rows unjudged. ``judged``, where given, gets the
    digests (:func:`~numoracle.running.draws.case_digest`) of the cases each
    row judged, in order, keyed by row. ``devices`` are the GPUs the workers
    are pinned to, round robin (default :func:`~numoracle.running.devices.gpu_devices`;
    none pinned where fewer than two). ``stats``, where given, gets where the
    time went: ``gpus`` (the ``CUDA_VISIBLE_DEVICES`` each worker ran with),
    ``own_draws`` (the workers that drew their own cases), ``draw_s`` and
    ``draw_judging_s`` (the driver's seconds drawing cases, in all and after
    the clock started) and ``worker_wait_s`` (each worker's seconds waiting
    for cases). With ``own_draws`` each worker draws its rows' cases in a
    process of its own (:class:`OwnDraws`) where that process draws the
    driver's probe chunk as the driver does; the driver draws for the others.
    """
    ctx = multiprocessing.get_context("spawn")
    pins = worker_devices(jobs, gpu_devices() if devices is None else tuple(devices))
    dealt = _deal(rows, jobs, pins)
    hands = [(pins[w], hand) for w, hand in enumerate(dealt) if hand]
    results: list[TargetResult | None] = [None] * len(rows)
    reasons: dict[int, str] = {}
    workers: list[tuple[Any, Connection, list[int]]] = []
    done: dict[Any, Any] = {}
    own = (_driver_modules(), _portable(rows[0]), _probe_block(rows, settings)) \
        if own_draws and rows else None
    t0 = time.monotonic()
    for w, (device, hand) in enumerate(hands):
        parent, child = ctx.Pipe()
        specs = [(k, _portable(rows[k])) for k in hand]
        with pinned(device):  # the child reads it before importing CUDA
            # not a daemon: it starts its draw process (it ends when its pipe closes, and
            # is ended below)
            p = ctx.Process(target=_worker, args=(child, specs, settings, own), daemon=False,
                            name=f"numoracle-run-{w}")
            p.start()
        child.close()
        workers.append((p, parent, hand))
    warm: dict[str, float] = {}
    draws = RunDraws(rows, settings)  # for workers whose own draws disagree with this process's
    probe = None
    if own is not None:  # the chunk each worker's draw process must draw as this process does
        probe = [case_digest(c) for c in
                 RunDraws(rows[:1], settings).block(0, own[2]).raw(0)]
    agreed: dict[Connection, bool] = {}
    drawn_warm = 0.0
    try:
        live = []
        for p, conn, hand in workers:
            left = None if warm_limit is None else max(warm_limit - (time.monotonic() - t0), 0)
            got = _recv(conn, left) if own is not None else _recv_drawing(conn, left, draws)
            if got is not None and got[0] == "warm":
                for key, s in got[1].items():
                    warm[key] = max(warm.get(key, 0.0), s)
                agreed[conn] = probe is not None and got[2] == probe
                live.append((p, conn, hand))
            else:
                why = ("its worker did not finish warming up" if got is None
                       else f"its worker failed: {_last_line(got[1])}")
                reasons.update(dict.fromkeys(hand, why))
        warm_wall = time.monotonic() - t0
        if on_warm is not None:
            on_warm()
        drawn_warm = draws.seconds
        t1 = time.monotonic()
        for _p, conn, _hand in live:
            conn.send(("go", seconds, agreed[conn]))
        _collect(live, results, reasons, on_case, draws, judged, done,
                 None if seconds is None else t1 + seconds,
                 ahead=not all(agreed[conn] for _p, conn, _hand in live))
        judge_wall = time.monotonic() - t1
    finally:
        for p, conn, _hand in workers:
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
            conn.close()
    if stats is not None:
        stats.update({"gpus": [done[conn]["gpu"] if conn in done else None
                               for _p, conn, _hand in workers],
                      "own_draws": sum(bool(done.get(conn, {}).get("own_draws"))
                                       for _p, conn, _hand in workers),
                      "draw_s": round(draws.seconds, 2),
                      "draw_judging_s": round(draws.seconds - drawn_warm, 2),
                      "worker_wait_s": [round(done[conn]["waited_s"], 2) if conn in done
                                        else None for _p, conn, _hand in workers]})
    out: list[TargetResult] = []
    for k, res in enumerate(results):
        if res is None:
            t = rows[k].target
            res = TargetResult(t.name, t.op, t.precision.name, verdict=RunVerdict.UNJUDGED,
                               diagnosis=reasons.get(k, "its worker ended without a result"),
                               regime=rows[k].regime, asked=rows[k].asked)
        out.append(res)
    return out, warm, warm_wall, judge_wall


def _recv(conn: Connection, timeout: float | None) -> Any:
    """The next message, or None when none came within ``timeout`` or the
    worker is gone."""
    try:
        if timeout is not None and not conn.poll(timeout):
            return None
        return conn.recv()
    except (EOFError, OSError):
        return None


def _recv_drawing(conn: Connection, timeout: float | None, draws: RunDraws) -> Any:
    """:func:`_recv` while the workers warm up: the driver draws chunks ahead
    (:meth:`RunDraws.ahead`, up to :data:`WARM_AHEAD_CHUNKS` a block) while
    nothing has come."""
    end = None if timeout is None else time.monotonic() + timeout
    while not conn.poll(0) and (end is None or time.monotonic() < end) and \
            draws.ahead(WARM_AHEAD_CHUNKS):
        pass
    return _recv(conn, None if end is None else max(end - time.monotonic(), 0.0))


def _last_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def _collect(live: list[tuple[Any, Connection, list[int]]], results: list[TargetResult | None],
             reasons: dict[int, str], on_case: Callable[[int, bool], None] | None,
             draws: RunDraws, judged: dict[int, list[str]] | None,
             done: dict[Any, Any], end: float | None, *, ahead: bool = True) -> None:
    """Read the workers' messages until every one is done or gone; draw the
    chunks of cases they ask for, and (with ``ahead``: some worker asks this
    process for its cases) others ahead until ``end``. ``done`` gets each
    worker's closing numbers, keyed by its connection."""
    from multiprocessing.connection import wait  # noqa: PLC0415 - only with workers

    open_ = {conn: hand for _p, conn, hand in live}
    while open_:
        waiting = wait(list(open_), timeout=0)
        if not waiting and ahead and (end is None or time.monotonic() < end) and draws.ahead():
            continue  # a chunk drawn before it is asked for, while no worker needs one
        for ready in waiting or wait(list(open_), timeout=0.05):  # then ahead again
            conn = cast("Connection", ready)
            got = _recv(conn, 0)
            hand = open_[conn]
            if got is None or got[0] in ("done", "error"):
                if got is None or got[0] == "error":
                    why = ("its worker died" if got is None
                           else f"its worker failed: {_last_line(got[1])}")
                    for k in hand:
                        if results[k] is None:
                            reasons[k] = why
                elif got[1] is not None:
                    done[conn] = got[1]
                del open_[conn]
            elif got[0] == "case":
                if on_case is not None:
                    on_case(got[1], got[2])
                if judged is not None:
                    judged.setdefault(got[1], []).append(got[3])
            elif got[0] == "row":
                results[got[1]] = got[2]
            elif got[0] == "draw":
                _, k, block, j = got
                chunk = draws.chunk(k, block, j)
                with contextlib.suppress(OSError):  # a worker gone: its pipe's end says so next
                    conn.send(("chunk", k, block, j, chunk))
