"""The numpy.testing-style message of a verdict: criterion first, non-finite
placement before values, mismatched count and share, the worst elements, the
diagnosis, then the repro and the command that replays it.

This module sits below :mod:`numoracle.checking.verdict` (which formats its
verdicts with it) and does not import it: it reads the fields a verdict and an
output verdict have.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["format_verdict", "format_output", "fmt_ratio"]


def fmt_ratio(r: float | None) -> str:
    """A ratio for humans: ``0.031``, ``12.5``, ``inf``."""
    if r is None or not np.isfinite(r):
        return "inf"
    return f"{r:.3g}"


def format_output(o: Any, probabilistic: bool) -> list[str]:
    """Lines about one output: criterion, NaN/Inf placement, counts, worst elements."""
    kind = "probabilistic" if probabilistic else "deterministic"
    crit = "bound 0 (exact regime)" if o.exact else f"{kind} bound"
    lines = [f"  {o.name} {o.shape}: |got - ref| / bound < 1 with the {crit}, n = {o.n}"]
    if o.nonfinite:
        lines.append(f"    non-finite: {o.nonfinite}")
    share = o.mismatched / max(o.count, 1)
    lines.append(f"    mismatched elements: {o.mismatched} / {o.count} ({share:.1%}); "
                 f"worst ratio {fmt_ratio(o.worst_ratio)}, median {fmt_ratio(o.median_ratio)}")
    if not o.passed and o.worst:
        lines.append(f"    {'index':<16}{'reference':>16}{'got':>16}{'error':>12}"
                     f"{'bound':>12}{'ratio':>10}")
        for e in o.worst:
            lines.append(f"    {e.index!s:<16}{e.reference:>16.8g}{e.got:>16.8g}"
                         f"{e.error:>12.3g}{e.bound:>12.3g}{fmt_ratio(e.ratio):>10}")
    if o.per_model:
        lines.append("    worst ratio by model: " + ", ".join(
            f"{k} {fmt_ratio(v)}" for k, v in o.per_model.items()))
    if o.diagnosis:
        lines.append(f"    diagnosis: {o.diagnosis}")
    if getattr(o, "note", ""):
        lines.append(f"    note: {o.note}")
    return lines


def format_verdict(v: Any, *, probabilistic: bool = False) -> str:
    """numpy.testing-style message for a verdict; ends with the replay command."""
    head = "PASS" if v.passed else "FAIL"
    lines = [f"{head}: {v.target} on {v.op}, claiming {v.precision}",
             f"  case: {v.case.describe()}"]
    if v.error:
        lines.append(f"  error: {v.error}")
    if v.engine:
        lines.append(f"  engine: {v.engine}")
    for o in v.outputs.values():
        if not v.passed and o.passed and not o.per_model:
            lines.append(f"  {o.name}: ok (worst ratio {fmt_ratio(o.worst_ratio)})")
            continue
        lines.extend(format_output(o, probabilistic))
    if v.repro:
        lines.append(f"  repro: {v.repro}")
        lines.append(f"  replay: numoracle replay {v.repro}")
    return "\n".join(lines)
