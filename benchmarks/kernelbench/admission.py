"""Which official instances run when, and whole or not: device memory reserved by a
model fitted to measured peaks, problems admitted where it is not yet reserved.

A problem's *plan* is the device memory its judgement takes: the float64 floor of
its official instance (inputs, parameters, intermediate values) times a per-byte
cost for the judge's process (the oracle's values, radii and temporaries, torch's
reference), plus the candidate's own copies (its storage format: half the floor in
fp32) and a fixed part (the CUDA contexts of the judge's and the candidate's
processes). The per-byte cost is fitted to the peaks a run measured
(:func:`fit`): per kind of problem (:data:`KINDS`), a high quantile of peak over
floor among the problems judged whole; a problem whose own peak was measured
whole is planned at that peak (times a margin).

An instance is judged *whole* wherever its plan fits the device's memory at all;
beyond that on sampled rows or at reduced sizes, with as large a float64 floor
as a third of the device holds. :class:`Admission` starts a problem where its
plan fits the memory not yet reserved on a device (and a judging slot is free),
the big ones first, the small ones beside them; a problem that waits at the
head of the queue longer than ``patience`` while problems behind it hold the
memory it needs stops them from starting until it fits. One whose judgement ran out of device memory beside other problems is
judged again whole, alone on a device, before it falls back to sampled rows.

Everything here is bookkeeping (no torch, no device): the driver
(:mod:`benchmarks.kernelbench.official`) measures and runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "GIB", "MemoryModel", "Planned", "Ticket", "Room", "Admission",
           "kind_of", "row_kind", "fit", "constant_model", "out_of_memory", "simulate",
           "Simulated"]

GIB = 2 ** 30
#: kinds of problem whose judgements take memory alike per floor byte (first match)
KINDS = ("transposed convolution", "convolution", "pooling", "matmul", "other")
_POOLING = ("pool",)
_MATMUL = ("mm", "bmm", "addmm", "matmul", "baddbmm", "linear",
           "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
           "scaled_dot_product_attention", "einsum")
#: the least float64 floor whose peak the fit reads (below it the fixed part dominates)
FIT_LEAST_FLOOR = GIB


def kind_of(ops: Iterable[str], *, transposed: bool = False) -> str:
    """The kind (:data:`KINDS`) of a problem whose forward dispatches the ATen ops
    ``ops`` (names without ``aten::``); ``transposed`` where one of its convolutions
    is transposed."""
    names = {o.split("::")[-1].split(".")[0] for o in ops}
    if any("convolution" in n or n.startswith("conv") for n in names):
        return "transposed convolution" if transposed or any("transpose" in n
                                                              for n in names) \
            else "convolution"
    if any(p in n for n in names for p in _POOLING):
        return "pooling"
    if names & set(_MATMUL):
        return "matmul"
    return "other"


@dataclass
class MemoryModel:
    """Device bytes a whole judgement takes, by kind and by measured peaks."""

    #: the judge's process: device bytes per float64 floor byte, by kind (``"all"``:
    #: kinds the fit had too few peaks of)
    per_byte: dict[str, float]
    #: device bytes of every problem beside its floor (CUDA contexts)
    fixed: int = 3 * GIB // 2
    #: the candidate's process: bytes per float64 floor byte (fp32 copies)
    candidate: float = 0.5
    #: a measured peak is planned at this many times itself
    margin: float = 1.25
    #: measured peaks of whole judgements, bytes by problem name
    peaks: dict[str, int] = field(default_factory=dict)
    #: measured seconds by problem name (the order of the queue)
    seconds: dict[str, float] = field(default_factory=dict)
    #: how the model was made (the fit's source, quantile and counts)
    how: str = ""

    def judge_bytes(self, name: str, kind: str, floor: int) -> int:
        """The judge's process on the whole instance: its measured peak where known,
        else the kind's per-byte cost times the floor."""
        if name in self.peaks:
            return int(self.margin * self.peaks[name])
        return int(self.per_byte.get(kind, self.per_byte["all"]) * floor)

    def planned(self, name: str, kind: str, floor: int) -> int:
        """Device bytes the whole judgement of ``name`` takes (both processes)."""
        return self.fixed + int(self.candidate * floor) + self.judge_bytes(name, kind, floor)

    def floor_within(self, kind: str, room: int) -> int:
        """The largest float64 floor the judge's process evaluates in ``room`` bytes."""
        return max(int(room / self.per_byte.get(kind, self.per_byte["all"])), 0)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def load(cls, path: Path) -> MemoryModel:
        return cls(**json.loads(Path(path).read_text()))


def constant_model(per_byte: float) -> MemoryModel:
    """Every kind at ``per_byte`` device bytes per floor byte, all in it (no fixed
    part, no candidate's share, no measured peak): the plan before any fit."""
    return MemoryModel({"all": float(per_byte)}, fixed=0, candidate=0.0,
                       how=f"constant: {per_byte:g} device bytes per float64 floor byte")


def _quantile(values: Sequence[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def row_kind(row: dict[str, Any]) -> str:
    """A measured row's kind: the plan's where the row carries it, else from the
    ATen ops its candidate (the problem's own Model) dispatched and its name."""
    if row.get("kind") in KINDS:
        return str(row["kind"])
    name = row.get("problem", "").lower()
    return kind_of(row.get("ops", []), transposed="transpose" in name)


def fit(rows: Sequence[dict[str, Any]], *, quantile: float = 0.9, least: int = 3,
        source: str = "", base: MemoryModel | None = None,
        peak: str = "reserved") -> MemoryModel:
    """A memory model fitted to the measured ``rows`` of an official run (its
    ``official.json`` rows): per kind, the ``quantile`` of the judge's peak over
    the float64 floor among rows judged whole that passed (the problem's own
    ``Model``: any other verdict stopped somewhere) with a floor of at least
    :data:`FIT_LEAST_FLOOR`; a kind with fewer than ``least`` such rows takes
    the quantile over all of them. The peak read (``peak``) is ``reserved``
    (``peak_gib``, cached blocks too: an uncapped process's allocator keeps them
    from the problems beside it until its judgement ends) or ``live``
    (``live_gib``, the most in use: what a capped process needs; rows without it
    are left out). Every such row's peak is kept as
    that problem's own; the seconds of every row judged or killed at the limit
    are kept."""
    base = base or MemoryModel({"all": 6.0})
    ratios: dict[str, list[float]] = {}
    peaks: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for r in rows:
        if r.get("how") != "not finished" or "limit" in str(r.get("reason", "")):
            seconds[r["problem"]] = float(r.get("seconds", 0.0))  # not: never started
        top, floor = r.get("peak_gib" if peak == "reserved" else "live_gib"), \
            r.get("floor_gib", 0.0)
        if r.get("how") != "whole" or r.get("status") != "pass" or top is None:
            continue  # a failing or stopped judgement's peak may be partial
        peaks[r["problem"]] = int(top * GIB)
        if floor * GIB >= FIT_LEAST_FLOOR:
            ratios.setdefault(row_kind(r), []).append(top / floor)
    every = [x for v in ratios.values() for x in v]
    if not every:
        raise ValueError(f"no row judged whole with a measured peak and a floor of at least "
                         f"{FIT_LEAST_FLOOR / GIB:g} GiB among {len(rows)}: nothing to fit; "
                         "give the official.json of a run on a GPU")
    per_byte = {"all": _quantile(every, quantile)}
    counts = []
    for kind, v in sorted(ratios.items()):
        if len(v) >= least:
            per_byte[kind] = _quantile(v, quantile)
        counts.append(f"{kind} {len(v)} (x{_quantile(v, quantile):.2f})")
    how = (f"fitted to {source or 'measured rows'}: per kind, the {quantile:g} quantile of "
           f"the judge's {peak} peak GiB over the float64 floor among {len(every)} rows judged whole "
           f"with a floor of at least {FIT_LEAST_FLOOR / GIB:g} GiB ({'; '.join(counts)}; "
           f"kinds with fewer than {least} take all rows' x{per_byte['all']:.2f}); "
           f"{len(peaks)} measured peaks kept, planned at x{base.margin:g}; plus the "
           f"candidate's {base.candidate:g} and {base.fixed / GIB:g} GiB fixed per problem")
    return MemoryModel(per_byte, fixed=base.fixed, candidate=base.candidate,
                       margin=base.margin, peaks=peaks, seconds=seconds, how=how)


@dataclass
class Planned:
    """What the driver found of a problem before judging it."""

    name: str
    floor: int
    kind: str = "other"
    #: the oracle's estimated work (multiply-adds)
    work: float = 0.0
    #: host bytes the judgement takes
    host: int = 0


@dataclass
class Ticket:
    """A problem's place in the queue: how it is judged and what it reserves."""

    problem: Planned
    #: judged whole (its plan fits the device)
    whole: bool
    #: device bytes reserved while it runs
    reserve: int
    #: the float64 floor the judge evaluates whole (its ``max_bytes``)
    max_bytes: int
    #: judged with the device to itself (again, after running out of memory beside
    #: others): the judge falls back to sampled rows only then
    alone: bool = False
    #: whether it was queued again
    retried: bool = False
    #: since when it waits at the head of the queue (None: not there)
    waiting: float | None = None
    #: its place in the queue's order (:meth:`Admission.order`): lower goes first
    rank: int = 0


@dataclass
class Room:
    """A device's memory and judging slots, and what its running problems reserve."""

    name: str
    memory: int
    slots: int
    used: int = 0
    running: list[Any] = field(default_factory=list)


def out_of_memory(row: dict[str, Any]) -> bool:
    """Whether a judgement's row says it was not judged for want of device memory, or
    that the candidate's process did not start (with the problem's own ``Model`` as the
    candidate, the machine's doing: a CUDA context that found no memory)."""
    reason = str(row.get("reason", "")).lower()
    if "candidate's process did not start" in reason:
        return True
    return row.get("status") == "not judged" and ("out of memory" in reason
                                                  or "out of device memory" in reason)


class Admission:
    """Plans, orders and admits problems by device memory (see the module)."""

    def __init__(self, memory: int, model: MemoryModel, *, patience: float = 120.0,
                 least_bytes: int = 256 << 20, lean: float | None = None) -> None:
        #: the usable memory of the smallest device
        self.memory = memory
        self.model = model
        self.patience = patience
        #: the float64 floor every judgement may evaluate whole (the host's)
        self.least_bytes = least_bytes
        #: the judge's device bytes per floor byte a whole judgement is tried at where
        #: the model's plan does not fit the device (None: not tried)
        self.lean = lean

    def ticket(self, p: Planned) -> Ticket:
        """Whole where the plan fits the device; else, with ``lean``, whole where the
        plan at ``lean`` device bytes per floor byte fits (reserved at that: one that
        runs out beside others is judged again alone, and only alone falls back to
        sampled rows); else as large a floor as a third of the device holds, beside
        the candidate's whole run."""
        plan = self.model.planned(p.name, p.kind, p.floor)
        if plan <= self.memory:
            return Ticket(p, True, plan, max(p.floor, self.least_bytes))
        if self.lean is not None and p.name not in self.model.peaks:
            tried = self.model.fixed + int(self.model.candidate * p.floor) + \
                int(self.lean * p.floor)
            if tried <= self.memory:
                return Ticket(p, True, tried, max(p.floor, self.least_bytes))
        room = self.memory // 3
        floor = max(self.model.floor_within(p.kind, room), self.least_bytes)
        beside = self.model.fixed + int(self.model.candidate * p.floor)  # the candidate's
        # run of the whole instance
        reserve = min(self.memory, beside + self.model.judge_bytes("", p.kind, floor))
        return Ticket(p, False, reserve, floor)

    def big(self, t: Ticket) -> bool:
        """Whether ``t`` takes more than a quarter of a device."""
        return t.reserve > self.memory // 4

    def order(self, tickets: Iterable[Ticket], how: str = "big-first") -> list[Ticket]:
        """The queue: ``big-first`` (the default) those taking more than a quarter
        of a device first, the most memory first, then the rest the longest first
        (measured seconds where the model has them, else the estimated work);
        ``most-work-first`` / ``least-work-first`` by the estimated work alone."""
        tickets = list(tickets)
        known = self.model.seconds

        def key(t: Ticket) -> tuple[float, ...]:
            if how == "most-work-first":
                return (-t.problem.work,)
            if how == "least-work-first":
                return (t.problem.work,)
            if self.big(t):
                return (0, -float(t.reserve), -t.problem.work)
            return (1, -known.get(t.problem.name, float("inf")), -t.problem.work)
        if how not in ("big-first", "most-work-first", "least-work-first"):
            raise ValueError(f"order {how!r} is unknown; use big-first, most-work-first or "
                             "least-work-first")
        out = sorted(tickets, key=key)
        for i, t in enumerate(out):
            t.rank = i
        return out

    def admit(self, pending: list[Ticket], rooms: Sequence[Room], now: float,
              host_free: int | None = None) -> list[tuple[Ticket, Room]]:
        """Which pending tickets start now, and where: each, in queue order, on the
        device with the most memory not yet reserved among those its reservation
        fits with a slot free (an ``alone`` one only on a device running nothing).
        A ticket that does not fit is passed over, but once the queue's first has
        waited ``patience`` seconds while problems behind it hold the memory it needs
        (an ``alone`` one at once), nothing behind it starts until it does. The started ones are removed from ``pending`` and
        reserved in their rooms (the caller releases them with :meth:`release`)."""
        started = []
        host = host_free
        for t in list(pending):
            fits = [r for r in rooms if len(r.running) < r.slots
                    and r.used + t.reserve <= r.memory and (not t.alone or not r.running)]
            if fits and (host is None or t.problem.host <= host or
                         all(not r.running for r in rooms)):
                room = max(fits, key=lambda r: (r.memory - r.used, -len(r.running)))
                room.used += t.reserve
                room.running.append(t)
                if host is not None:
                    host -= t.problem.host
                t.waiting = None
                pending.remove(t)
                started.append((t, room))
                continue
            if t.waiting is None:
                t.waiting = now
            if t.alone or (now - t.waiting >= self.patience and self._behind(t, rooms)):
                break  # the rest wait until it starts
        return started

    def _behind(self, t: Ticket, rooms: Sequence[Room]) -> bool:
        """Whether problems behind ``t`` in the queue are what keeps it from starting:
        on some device it would fit without them (else stopping them gains nothing)."""
        return any(t.reserve <= r.memory - sum(x.reserve for x in r.running
                                               if x.rank < t.rank) for r in rooms)

    def release(self, t: Ticket, room: Room) -> None:
        """``t`` ended on ``room``: its reservation given back."""
        room.running.remove(t)
        room.used -= t.reserve

    def again(self, t: Ticket, row: dict[str, Any]) -> bool:
        """Whether ``t`` goes back to the queue's head: its whole judgement ran out of
        device memory while not alone (once; then it is judged alone, where the
        judge may fall back to sampled rows)."""
        if t.retried or t.alone or not out_of_memory(row):
            return False
        t.retried = t.alone = True
        t.reserve = self.memory
        t.waiting = None
        return True


@dataclass
class Simulated:
    """One ticket's run in :func:`simulate`."""

    name: str
    start: float
    end: float
    room: str
    whole: bool
    alone: bool
    retried: bool


def simulate(admission: Admission, tickets: Sequence[Ticket], rooms: Sequence[Room],
             seconds: Callable[[Ticket], float], *, order: str = "big-first",
             ooms: Callable[[Ticket, Room], bool] | None = None, tick: float = 0.5,
             deadline: float = float("inf")) -> list[Simulated]:
    """The schedule :class:`Admission` makes of ``tickets`` on ``rooms``, on a clock
    of ``tick`` seconds: each runs ``seconds(ticket)``; ``ooms(ticket, room)``,
    asked as it ends, says whether it ran out of device memory (then it is queued
    again as the driver does). Tickets not started by ``deadline`` are left out."""
    pending = admission.order(tickets, order)
    running: list[tuple[float, Ticket, Room, float]] = []
    done: list[Simulated] = []
    now = 0.0
    while (pending and now <= deadline) or running:
        for item in [r for r in running if r[0] <= now]:
            end, t, room, start = item
            running.remove(item)
            crowded = ooms is not None and ooms(t, room)
            admission.release(t, room)
            if crowded and admission.again(t, {"status": "not judged",
                                               "reason": "out of memory"}):
                pending.insert(0, t)
                continue
            done.append(Simulated(t.problem.name, start, end, room.name, t.whole, t.alone,
                                  t.retried))
        if now <= deadline:
            for t, room in admission.admit(pending, rooms, now):
                running.append((now + seconds(t), t, room, now))
        now += tick
    return done
