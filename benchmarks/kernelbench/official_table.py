"""The official run's table: how each official instance was judged, the share judged
whole over every problem, the problems over the time limit, and per problem its
seconds, float64 floor, planned and measured device memory.

:func:`write_table` writes ``official.md`` and ``official.json`` (the rows and the
run's record) after every problem, so that a run stopped early keeps its rows.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.kernelbench.worker import HOW

__all__ = ["write_table", "over_limit", "row_seconds"]


def row_seconds(r: dict[str, Any]) -> float:
    """A problem's seconds from its first judgement's start to its row (both
    judgements of one judged again alone; the judgement's own where not kept)."""
    return float(r.get("wall_s", r.get("seconds", 0.0)))


def over_limit(rows: list[dict[str, Any]], limit: float) -> list[dict[str, Any]]:
    """The rows over ``limit`` seconds (:func:`row_seconds`), the longest first."""
    return sorted((r for r in rows if row_seconds(r) > limit), key=lambda r: -row_seconds(r))


def _phases(rows: list[dict[str, Any]]) -> list[str]:
    """Seconds per phase summed over the judged rows, the most first, and each phase's
    longest row."""
    total: Counter[str] = Counter()
    longest: dict[str, tuple[float, str]] = {}
    for r in rows:
        for phase, sec in r.get("timings", {}).items():
            if ":" in phase:  # a part of another phase
                continue
            total[phase] += sec
            if sec > longest.get(phase, (0.0, ""))[0]:
                longest[phase] = (sec, r["problem"])
    if not total:
        return []
    out = ["| phase | seconds over the judged rows | longest (s) |", "|---|---|---|"]
    out += [f"| {p} | {t:.0f} | {longest[p][1]} ({longest[p][0]:.1f}) |"
            for p, t in total.most_common()]
    return out


def _row_md(r: dict[str, Any]) -> str:
    verdict = {"pass": "pass", "fail": "FAIL"}.get(r["status"], r["status"])
    why = r.get("reason", "")
    notes = [n for n in r.get("notes", []) if "official instance" in n or "dropout" in n
             or "oracle on the device" in n or "judged again" in n]
    if notes:
        why = f"{why}; {notes[0]}"
    peak = r.get("peak_gib")
    return (f"| {r['problem']} | {r['how']} | {row_seconds(r):.1f} | {verdict} | "
            f"{r.get('floor_gib', 0):.3g} | {r.get('kind', '-')} | "
            f"{r.get('planned_gib', '-')} | {'-' if peak is None else peak} | "
            f"{why[:220].replace('|', '/')} |")


def _sort_key(r: dict[str, Any]) -> tuple[str, int]:
    level, rest = r["problem"].split("/", 1)
    number = rest.split("_")[0]
    return level, int(number) if number.isdigit() else 0


def write_table(out: Path, head: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """``official.json`` and ``official.md`` of the run so far under ``out``."""
    rows = sorted(rows, key=_sort_key)
    counts = Counter(r["how"] for r in rows)
    verdicts = Counter(r["status"] for r in rows)
    (out / "official.json").write_text(json.dumps({"meta": head, "rows": rows}, indent=1)
                                       + "\n")
    n = len(rows)
    limit = float(head["limit"])
    slow = over_limit(rows, limit)
    judged = [row_seconds(r) for r in rows if r["how"] != "not finished"]
    whole = counts.get("whole", 0)
    in_pieces = sum(1 for r in rows
                    if r["how"] == "whole" and r.get("official_how") == "pieces")
    retried = sum(1 for r in rows if r.get("retried"))
    lines = ["# KernelBench official instances judged on the device", "",
             f"Command: `{head['command']}`  ",
             f"Commit {head['commit']}, {head['date']}; {head['device_name']}; torch "
             f"{head['torch']}; {head['devices']} device(s) of {head['memory_gib']} GiB "
             f"usable, up to {head['slots']} problems at once per device, admitted where "
             f"their planned device memory fits what is not yet reserved (order "
             f"{head.get('order', '-')}); each problem's own `Model` as `ModelNew`, claim "
             f"fp32, {head['examples']} drawn cases after the official one; whole wherever "
             f"the plan fits the device; limit {limit:g} s per problem; "
             f"{head.get('seconds', 0):.0f} s in all.  ",
             f"Memory model: {head.get('memory_model', '-')}"
             + (f"; a plan beyond the device tried whole at {head['lean']:g} bytes per "
                "floor byte (`--lean`)" if head.get("lean") else "") + ".  ",
             f"Earlier calls: {head.get('resumed', 'none')} (their rows name the commit, "
             "`resumed_from`).", "",
             f"**Judged whole: {whole} of {n} ({100 * whole / max(n, 1):.0f}%)**, of which "
             f"in pieces of rows: {in_pieces}. "
             f"Over {limit:g} s: {len(slow)}. Seconds per judged problem: median "
             f"{statistics.median(judged) if judged else 0:.1f}, most "
             f"{max(judged, default=0):.1f}. Judged again alone after running out of "
             f"device memory beside others: {retried}.", "",
             "| how judged | problems | share |", "|---|---|---|"]
    lines += [f"| {h} | {counts.get(h, 0)} | {100 * counts.get(h, 0) / max(n, 1):.0f}% |"
              for h in HOW]
    fits = sum(1 for r in rows if r.get("fits_whole"))
    lines += ["", f"Verdicts: {dict(verdicts)}; problems in the table: {n}; whose plan fits "
              f"the device whole (judged or not): {fits} ({100 * fits / max(n, 1):.0f}%).", ""]
    lines += [f"Over {limit:g} s (from the first judgement's start):", ""]
    lines += [f"- {r['problem']}: {row_seconds(r):.0f} s, {r['how']}"
              + (f" ({r['reason'][:80]})" if r["how"] == "not finished" else "")
              for r in slow] or ["- none"]
    lines += ["", *_phases(rows)]
    lines += ["", "`s`: from the problem's first start to its row (both judgements of one "
              "judged again). `planned GiB`: the device memory reserved for it (both "
              "processes). `peak GiB`: the judge's process, torch's allocator plus CuPy's "
              "pool (reserved); the candidate's process is not counted.", "",
              "| problem | how judged | s | verdict | float64 floor GiB | kind | planned GiB "
              "| peak GiB | why |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [_row_md(r) for r in rows]
    (out / "official.md").write_text("\n".join(lines) + "\n")
