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

__all__ = ["available", "ratios_by_length", "precision_ladder", "zoo_catch", "thin", "PER_OCTAVE",
           "MARKERS", "series_colours", "output_markers"]

#: ratios drawn on a log axis are clipped into this range (0 and inf included)
LOW, HIGH = 1e-7, 1e7
#: points drawn per output and octave of the reduction length (the worst always among them)
PER_OCTAVE = 6


def available() -> str | None:
    """None when matplotlib can draw here, else the reason it cannot."""
    try:
        import matplotlib  # noqa: PLC0415 - optional extra 'report'
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    matplotlib.use("Agg", force=True)
    return None


def _png(fig: Any, tight: bool = True) -> str:
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


Sample = tuple[str, int, float, float, float, float, bool]


def thin(samples: Sequence[Sample], per_octave: int = PER_OCTAVE) -> list[Sample]:
    """At most ``per_octave`` samples per output and octave of ``n`` (and
    every exact one's count kept by the caller): the worst under each bound,
    then samples evenly spaced in the order of their worst ratio, so that the
    picture keeps its extremes and its spread whatever the number of cases.

    >>> s = [("y", 100, r / 1000, r / 1000, 0.0, 0.0, False) for r in range(1000)]
    >>> kept = thin(s, 4)
    >>> len(kept), max(k[2] for k in kept), min(k[2] for k in kept)
    (3, 0.999, 0.0)
    """
    groups: dict[tuple[str, int], list[Sample]] = {}
    for s in samples:
        if not s[6]:
            groups.setdefault((s[0], max(s[1], 1).bit_length()), []).append(s)
    out: list[Sample] = []
    for group in groups.values():
        if len(group) <= per_octave:
            out += group
            continue
        group.sort(key=lambda s: s[2])
        last = len(group) - 1
        spots = {round(last - i * last / (per_octave - 2)) for i in range(per_octave - 1)}
        picked = [group[i] for i in sorted(spots)]
        worst_prob = max(group, key=lambda s: s[3])
        if all(p is not worst_prob for p in picked):
            picked.append(worst_prob)
        out += picked
    return out


def _plain_ticks(ax: Any) -> None:
    """Log axes labelled in plain text (``2^10``, ``1e-05``) without minor
    ticks: mathtext labels cost most of a small picture's drawing time."""
    from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: PLC0415 - optional extra

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"2^{math.log2(v):.0f}"
                                               if v > 0 else ""))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0e}".replace("e-0", "e-")
                                               .replace("e+0", "e")))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())


def _clip(r: float) -> float:
    if math.isnan(r):
        return HIGH
    return min(max(r, LOW), HIGH)


def _pick(s: Sample, which: int) -> tuple[float, float]:
    """(worst, median) ratio of a sample under the deterministic (0) or the
    probabilistic (1) bound."""
    return (s[2], s[4]) if which == 0 else (s[3], s[5])


#: marker of each output in a picture of several targets (colours name the targets),
#: and the character that shows it in the page's legend
MARKERS = {"o": "●", "s": "■", "^": "▲", "v": "▼", "D": "◆", "<": "◀", ">": "▶", "p": "⬟",
           "X": "✖", "h": "⬢"}


def series_colours(count: int) -> list[str]:
    """The colour of each of ``count`` targets in :func:`ratios_by_length`, as
    ``#rrggbb`` (tab10, or tab20 beyond ten targets; repeating past twenty)."""
    palette = _palette(count)
    return ["#{:02x}{:02x}{:02x}".format(*(round(255 * c) for c in palette[k % len(palette)][:3]))
            for k in range(count)]


def _palette(count: int) -> list[tuple[float, ...]]:
    import matplotlib  # noqa: PLC0415 - optional extra 'report'

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [tuple(cmap(i)) for i in range(cmap.N)]


def output_markers(outputs: Sequence[str]) -> dict[str, str]:
    """The marker of each output in :func:`ratios_by_length`, in order."""
    keys = list(MARKERS)
    return {o: keys[i % len(keys)] for i, o in enumerate(outputs)}


def ratios_by_length(series: Sequence[tuple[str, Sequence[Sample]]]) -> str:
    """err/bound against the reduction length ``n`` for the targets of one op:
    left the deterministic bound, right the probabilistic one; target ``k`` of
    ``series`` (label and samples) in colour ``series_colours(len(series))[k]``,
    each output with its :func:`output_markers` marker, each point the worst
    element of a case (:func:`thin` keeps at most :data:`PER_OCTAVE` per
    output, octave and target, the worst among them). Exact-regime cases
    (bound 0, bit-exact) have ratio 0 and are not drawn. One picture per op,
    its legend left to the page: drawing costs per picture and per text, not
    per point."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 - optional extra 'report'
    import numpy as np  # noqa: PLC0415 - with the picture

    outputs = list(dict.fromkeys(s[0] for _, samples in series for s in samples))
    marker = output_markers(outputs)
    palette = np.array(_palette(len(series)))
    drawn = [thin(samples) for _, samples in series]
    seen = [_clip(v) for pts in drawn for s in pts for v in (s[2], s[3]) if v > 0]
    lo, hi = min(seen + [0.1]), max(seen + [1.0])
    ns = [max(s[1], 1) for _, samples in series for s in samples] or [1]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.0), sharey=True)
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.17, top=0.9, wspace=0.04)
    for ax, (kind, which) in zip(axes, (("deterministic", 0), ("probabilistic", 1)),
                                 strict=True):
        for o in outputs:  # one artist per output and panel: the colours name the targets
            xs: list[int] = []
            ys: list[float] = []
            ks: list[int] = []
            for k, pts in enumerate(drawn):
                for s in pts:
                    ratio = _pick(s, which)[0]
                    if s[0] == o and ratio > 0:
                        xs.append(max(s[1], 1))
                        ys.append(_clip(ratio))
                        ks.append(k % len(palette))
            if xs:
                ax.scatter(xs, ys, c=palette[ks], marker=marker[o], s=12, alpha=0.75,
                           linewidths=0)
        ax.axhline(1.0, color="crimson", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_ticks(ax)
        ax.set_ylim(lo / 3, hi * 3)
        ax.set_xlim(min(ns) / 1.5, (max(ns) + 1) * 1.5)
        ax.set_xlabel("reduction length n")
        ax.set_title(f"{kind} bound", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("|got − exact| / bound")
    return _png(fig, tight=False)


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
