"""Reports of a run: the terminal table and the JSON rows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .message import fmt_ratio

__all__ = ["results_table", "write_json"]


def results_table(rows: Sequence[dict[str, Any]], title: str, columns: Sequence[str]) -> Any:
    """A rich Table of result dicts, one row each, with the given columns."""
    from rich.table import Table  # noqa: PLC0415 - rich only for terminal output

    table = Table(title=title)
    for c in columns:
        names = c in ("target", "mutant")  # a name whole on one line; shapes wrap instead
        right = c in ("cases", "failures", "worst_ratio", "time_s", "cases_to_catch", "at case")
        table.add_column(c, justify="right" if right else "left",
                         min_width=max((len(str(r.get(c))) for r in rows), default=0)
                         if names else None)
    for r in rows:
        cells = []
        for c in columns:
            val = r.get(c)
            if c == "worst_ratio":
                cells.append(fmt_ratio(val))
            elif c in ("verdict", "status"):
                style = {"pass": "green", "FAIL": "bold red", "caught": "green",
                         "MISSED": "bold red", "fail": "bold red",
                         "missed": "bold red"}.get(str(val), "yellow")
                cells.append(f"[{style}]{val}[/{style}]")
            elif isinstance(val, float):
                cells.append(f"{val:.2f}")
            else:
                cells.append("" if val is None else str(val))
        table.add_row(*cells)
    return table


def write_json(path: Path | str, rows: Iterable[dict[str, Any]]) -> Path:
    """Write result dicts as a JSON list (non-finite numbers as strings)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not np.isfinite(x):
            return repr(x)
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, np.generic):
            return clean(x.item())
        return x

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps([clean(r) for r in rows], indent=2) + "\n")
    return p
