"""The pictures of ``report.html``, drawn with matplotlib (Agg backend, no
screen) and returned as base64 PNG text for ``<img src="data:...">``.

matplotlib is optional (``pip install 'numoracle[report]'``): :func:`available`
says whether it can be imported, and every drawing function is only called
when it can.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["available", "ratio_vs_length", "precision_ladder", "zoo_catch"]

#: ratios drawn on a log axis are clipped into this range (0 and inf included)
LOW, HIGH = 1e-7, 1e7


def available() -> str | None:
    """None when matplotlib can draw here, else the reason it cannot."""
    try:
        import matplotlib  # noqa: PLC0415 - optional extra 'report'
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    matplotlib.use("Agg", force=True)
    return None


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _clip(r: float) -> float:
    if math.isnan(r):
        return HIGH
    return min(max(r, LOW), HIGH)


Sample = tuple[str, int, float, float, float, float, bool]


def _pick(s: Sample, which: int) -> tuple[float, float]:
    """(worst, median) ratio of a sample under the deterministic (0) or the
    probabilistic (1) bound."""
    return (s[2], s[4]) if which == 0 else (s[3], s[5])


def ratio_vs_length(samples: Sequence[Sample],
                    title: str) -> str:
    """err/bound against the reduction length ``n``, one colour per output:
    left the deterministic bound, right the probabilistic one; filled dots the
    worst element of a case, crosses its median. Cases in the exact regime
    (bound 0, bit-exact) have ratio 0 and are counted in the legend."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'

    outputs = list(dict.fromkeys(s[0] for s in samples))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    colours = plt.get_cmap("tab10")
    seen = [_clip(v) for s in samples for v in (s[2], s[3], s[4], s[5]) if not s[6] and v > 0]
    lo, hi = min(seen + [0.1]), max(seen + [1.0])
    n_lo, n_hi = min(max(s[1], 1) for s in samples), max(max(s[1], 1) for s in samples) + 1
    for ax, (kind, which) in zip(axes, (("deterministic", 0), ("probabilistic", 1)),
                                 strict=True):
        drawn = False
        for k, name in enumerate(outputs):
            rows = [s for s in samples if s[0] == name]
            exact = sum(1 for s in rows if s[6])
            pts = [(max(s[1], 1), *_pick(s, which)) for s in rows if not s[6]]
            pts = [p for p in pts if p[1] > 0]
            label = f"{name} ({len(rows)} cases" + (f", {exact} exact)" if exact else ")")
            if pts:
                ax.plot([p[0] for p in pts], [_clip(p[1]) for p in pts], "o", ms=3.5,
                        color=colours(k % 10), label=label, alpha=0.75)
                med = [(p[0], p[2]) for p in pts if p[2] > 0]
                if med:
                    ax.plot([m[0] for m in med], [_clip(m[1]) for m in med], "x", ms=3,
                            color=colours(k % 10), alpha=0.45)
                drawn = True
            else:
                ax.plot([], [], "o", ms=3.5, color=colours(k % 10), label=label)
        ax.axhline(1.0, color="crimson", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(lo / 3, hi * 3)
        ax.set_xlim(n_lo / 1.5, n_hi * 1.5)
        ax.set_xlabel("reduction length n")
        ax.set_title(f"{kind} bound", fontsize=10)
        if not drawn:
            ax.text(0.5, 0.5, "every case bit-exact\nor ratio 0", ha="center", va="center",
                    transform=ax.transAxes, color="grey")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("|got − exact| / bound")
    axes[1].legend(fontsize=7, loc="upper right", framealpha=0.8)
    fig.suptitle(title, fontsize=11)
    return _png(fig)


def precision_ladder(per_model: Mapping[str, Mapping[str, float]], title: str) -> str:
    """The worst ratio of each output under each candidate model (the claimed
    one first, then its variants and the standard ladder); bars left of the
    red line (ratio 1) are models the result is consistent with."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'

    models = list(dict.fromkeys(m for ratios in per_model.values() for m in ratios))
    outputs = list(per_model)
    height = 0.8 / max(len(outputs), 1)
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(models) * max(1, len(outputs) ** 0.5) + 1.0))
    colours = plt.get_cmap("tab10")
    for k, name in enumerate(outputs):
        ys = [i + k * height for i in range(len(models))]
        vals = [per_model[name].get(m, float("nan")) for m in models]
        bars = ax.barh(ys, [_clip(v) for v in vals], height=height, color=colours(k % 10),
                       label=name, left=LOW)
        for bar, v in zip(bars, vals, strict=True):
            if not math.isfinite(v):
                bar.set_hatch("//")
    ax.axvline(1.0, color="crimson", lw=1, ls="--")
    ax.set_xscale("log")
    shown = [_clip(v) for ratios in per_model.values() for v in ratios.values()]
    ax.set_xlim(min(shown + [0.1]) / 10, max(shown + [1.0]) * 10)
    ax.set_yticks([i + height * (len(outputs) - 1) / 2 for i in range(len(models))])
    ax.set_yticklabels(models, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("worst |got − exact| / bound under the model (hatched: inf)")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=10)
    return _png(fig)


def zoo_catch(rows: Sequence[tuple[str, str, int | None]], examples: int | None) -> str:
    """Cases until each mutant was caught (``rows``: name, status, cases);
    missed mutants drawn red at the number of cases tried, skipped ones grey."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'

    fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.0))
    for i, (_name, status, cases) in enumerate(rows):
        if status == "caught":
            ax.barh(i, max(cases or 0, 1), color="seagreen")
            ax.text(max(cases or 0, 1), i, f" {cases}", va="center", fontsize=7)
        elif status == "missed":
            ax.barh(i, max(cases or examples or 1, 1), color="crimson")
            ax.text(max(cases or examples or 1, 1), i, " missed", va="center", fontsize=7,
                    color="crimson")
        else:
            ax.text(1, i, f" {status}", va="center", fontsize=7, color="grey")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(0.8, max([r[2] or 1 for r in rows] + [examples or 1, 10]) * 3)
    ax.set_xlabel("cases until caught (log)")
    ax.set_title("bug zoo: cases to catch each mutant", fontsize=10)
    return _png(fig)
