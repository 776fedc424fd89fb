"""``report.html``: one self-contained page (inline CSS, pictures embedded as
base64 PNG, no script, nothing fetched) of a ``numoracle run`` or a
``numoracle zoo``.

It shows the summary table; for a zoo, the cases each mutant took to be caught;
each failure's worst elements (index, reference, got, error, bound, ratio) with
its full message and replay command; per target and output, err/bound against
the reduction length under the deterministic and the probabilistic bound; and
for each diagnosed target its precision ladder (the worst ratio under every
candidate model). Without matplotlib the page is written all the same, with
the tables and a line saying how to get the pictures.
"""

from __future__ import annotations

import datetime
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checking.diagnosis import DiagnosisKind
from ..outcome import Outcome, RunVerdict
from . import plots

if TYPE_CHECKING:
    from ..checking.verdict import Verdict
    from ..running.runner import TargetResult

__all__ = ["write_html", "render_html", "NO_PICTURES"]

#: what the page says when matplotlib is missing
NO_PICTURES = ("Pictures need matplotlib, which is not installed here: "
               "pip install 'numoracle[report]' (or pip install matplotlib) and run again.")

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 1.5em auto;
       max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc;
       margin-top: 1.6em; font-size: 1.2em; } h3 { font-size: 1.0em; margin-bottom: 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0 1em 0; }
th, td { border: 1px solid #ddd; padding: 2px 7px; text-align: left; vertical-align: top; }
td:first-child { white-space: nowrap; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass, .caught { color: #18794e; font-weight: 600; } .fail, .missed { color: #c62828;
       font-weight: 700; } .skipped, .error, .unjudged { color: #a15c00; }
.note { background: #fff8e1; border: 1px solid #f0d58c; padding: 0.5em 0.8em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
img { max-width: 100%; } .meta { color: #666; font-size: 0.85em; }
code { background: #f3f3f3; padding: 0 3px; }
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _ratio(r: float | None) -> str:
    if r is None:
        return ""
    if math.isnan(r):
        return "nan"
    if math.isinf(r):
        return "inf"
    return f"{r:.3g}"


def _status(r: TargetResult, zoo: bool) -> str:
    """As ``report.json`` and ``zoo.json`` say it: pass, fail, skipped or
    unjudged; for a mutant caught, missed or skipped."""
    if zoo:
        return {RunVerdict.FAIL: "caught", RunVerdict.SKIPPED: "skipped"}.get(r.verdict, "missed")
    return r.status()[0]


def _img(b64: str, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{b64}">'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}>{cell}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _summary(results: Sequence[TargetResult], zoo: bool) -> str:
    if zoo:
        head = ["mutant", "op", "status", "cases to catch", "repro shape", "diagnosis"]
        rows = [[_e(r.target), _e(r.op),
                 f'<span class="{_status(r, True)}">{_e(_status(r, True))}</span>',
                 _e(r.cases_to_catch), _e(r.repro_shape), _e(r.diagnosis)] for r in results]
        return _table(head, rows, numeric=(3,))
    head = ["target", "op", "precision", "cases", "failures", "worst ratio", "status",
            "time s", "diagnosis or reason"]
    rows = [[_e(r.target), _e(r.op), _e(r.precision), _e(r.cases), _e(r.failures),
             _e(_ratio(r.worst_ratio)),
             f'<span class="{_status(r, False)}">{_e(_status(r, False))}</span>',
             f"{r.seconds:.2f}", _e(r.status()[1] or r.diagnosis)] for r in results]
    return _table(head, rows, numeric=(3, 4, 5, 7))


def _replayed(repro: str | None) -> Verdict | None:
    """The failure judged again from its repro's recorded outputs (the kernel is
    not run again), for its worst elements; None when that is not possible."""
    if not repro or not Path(repro).is_dir():
        return None
    from ..checking.replay import replay  # noqa: PLC0415 - only for failures with a repro

    try:
        return replay(repro, rerun=False)
    except Exception:  # noqa: BLE001 - the page still shows the run's message without it
        return None


def _failure(r: TargetResult, zoo: bool) -> str:
    parts = [f"<h3>{_e(r.target)} on {_e(r.op)}, claiming {_e(r.precision)}"
             f"{' (mutant, caught)' if zoo else ''}</h3>",
             f"<p>diagnosis: {_e(r.diagnosis)}</p>"]
    causes = [(name, d) for name, d in r.diagnoses.items() if d.kind is not DiagnosisKind.NONE]
    if causes:  # the structured diagnosis of each failing output: kind and model found
        parts.append(_table(["output", "kind", "consistent with", "also consistent with"],
                            [[_e(name), _e(d.kind), _e(d.model.name if d.model else ""),
                              _e(", ".join(m.name for m in d.alternatives))]
                             for name, d in causes]))
    if r.repro_shape:
        parts.append(f"<p>shrunk case: <code>{_e(r.repro_shape)}</code></p>")
    v = _replayed(r.repro)
    if v is not None:
        for o in v.outputs.values():
            if o.passed or not o.worst:
                continue
            share = o.mismatched / max(o.count, 1)
            parts.append(f"<p><b>{_e(o.name)}</b> {_e(o.shape)}: {o.mismatched} of {o.count} "
                         f"elements mismatched ({share:.1%}); n = {o.n}"
                         f"{'; bound 0 (exact regime)' if o.exact else ''}</p>")
            rows = [[_e(e.index), f"{e.reference:.9g}", f"{e.got:.9g}", f"{e.error:.3g}",
                     f"{e.bound:.3g}", _e(_ratio(e.ratio))] for e in o.worst]
            parts.append(_table(["index", "reference", "got", "error", "bound", "ratio"],
                                rows, numeric=(1, 2, 3, 4, 5)))
    elif r.message:
        parts.append("<p class='meta'>worst elements: in the message below "
                     "(no repro folder to read them from)</p>")
    if r.message:
        parts.append(f"<details><summary>full message</summary><pre>{_e(r.message)}</pre>"
                     "</details>")
    if r.repro:
        parts.append(f"<p>replay: <code>numoracle replay {_e(r.repro)}</code></p>")
    return "\n".join(parts)


def _ladder_table(r: TargetResult) -> str:
    models = list(dict.fromkeys(m for ratios in r.per_model.values() for m in ratios))
    effective = r.effective()
    rows = [[_e(name)] + [_e(_ratio(ratios.get(m))) for m in models]
            + [_e(effective.get(name, ""))] for name, ratios in r.per_model.items()]
    return _table(["output"] + models + ["most precise model that fits"], rows,
                  numeric=tuple(range(1, len(models) + 1)))


def render_html(results: Sequence[TargetResult], *, title: str = "numoracle run",
                zoo: bool = False, examples: int | None = None,
                observed: str | None = None) -> str:
    """The page as a string; see :func:`write_html`."""
    from .. import __version__  # noqa: PLC0415 - the package imports this module's peers

    missing = plots.available()
    ran = [r for r in results if r.verdict is not RunVerdict.SKIPPED]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>{_e(title)}</h1>",
            f"<p class='meta'>numoracle {_e(__version__)} · {_e(when)} · "
            f"{len(ran)} of {len(results)} {'mutants' if zoo else 'targets'} ran</p>"]
    if missing:
        body.append(f"<p class='note' id='no-pictures'>{_e(NO_PICTURES)} "
                    f"({_e(missing)})</p>")
    if observed:
        body.append(f"<p class='meta'>Hypothesis observability records: "
                    f"<code>{_e(observed)}</code> (open the folder in Tyche to see the "
                    "case distribution)</p>")
    if zoo:
        statuses = [_status(r, True) for r in results]
        caught = statuses.count("caught")
        body.append(f"<p>caught <b>{caught}</b> of {len(ran)} mutants that ran</p>")
    body += ["<h2 id='summary'>Summary</h2>", _summary(results if zoo else ran, zoo)]
    skipped: dict[str, list[str]] = {}
    for r in results:
        if r.verdict is RunVerdict.SKIPPED and not zoo:
            names = skipped.setdefault(r.diagnosis, [])
            if r.target not in names:
                names.append(r.target)
    if skipped:
        body.append("<p class='meta'>skipped (cannot run here): " + "; ".join(
            f"{_e(', '.join(names))} ({_e(reason)})" for reason, names in skipped.items())
            + "</p>")
    if zoo and not missing and results:
        body += ["<h2 id='zoo'>Cases to catch</h2>",
                 _img(plots.zoo_catch([(f"{r.target} ({r.op})", _status(r, True),
                                        r.cases_to_catch) for r in results], examples),
                      "cases to catch each mutant")]
    failed = [r for r in results if r.verdict is RunVerdict.FAIL]
    if failed:
        body.append("<h2 id='failures'>Failures: worst elements</h2>")
        body += [_failure(r, zoo) for r in failed]
    unjudged = [r for r in results
                if r.verdict is not RunVerdict.SKIPPED and r.status()[0] is Outcome.UNJUDGED]
    if unjudged:
        body.append("<h2 id='unjudged'>Unjudged</h2>")
        body += [f"<p><b>{_e(r.target)}</b> on {_e(r.op)}: {_e(r.status()[1])}</p>"
                 for r in unjudged]
    sampled = [r for r in ran if r.samples]
    if sampled and not zoo:
        body.append("<h2 id='ratios'>err / bound against reduction length</h2>")
        body.append("<p class='meta'>One picture per op: a colour per target, a marker per "
                    "output, each point the worst element of one passing case (at most "
                    f"{plots.PER_OCTAVE} per target, output and octave of n, the worst "
                    "among them); below the dashed line (ratio 1) passes. Outputs in the exact "
                    "regime (bound 0, bit-exact) are not drawn; the legend counts them.</p>")
        by_op: dict[str, list[TargetResult]] = {}
        for r in sampled:
            by_op.setdefault(r.op, []).append(r)
        for op, group in by_op.items():
            labels = [_series_label(r) for r in group]
            body.append(f"<h3>{_e(op)}</h3>")
            if missing:
                for r, label in zip(group, labels, strict=True):
                    body.append(f"<p>{_e(label)}</p>" + _samples_table(r))
            else:
                series = [(label, r.samples) for r, label in zip(group, labels, strict=True)]
                body.append(_img(plots.ratios_by_length(series), f"{op}: " + ", ".join(labels)))
                body.append(_legend(group, labels))
    diagnosed = [r for r in ran if r.per_model]
    if diagnosed:
        body.append("<h2 id='ladder'>Precision ladder</h2>")
        body.append("<p class='meta'>The worst ratio of each output under every candidate "
                    "model: the claimed one, it with subnormal inputs flushed or an unfused "
                    "bias, and the standard models of its storage format, most precise "
                    "first.</p>")
        for r in diagnosed:
            label = f"{r.target} on {r.op}, claiming {r.precision}"
            body.append(f"<h3>{_e(label)}</h3>")
            if not missing:
                body.append(_img(plots.precision_ladder(r.per_model, label), label))
            body.append(_ladder_table(r))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _legend(group: Sequence[TargetResult], labels: Sequence[str]) -> str:
    """The legend of an op's picture: each target's colour, cases and exact
    ones; each output's marker."""
    colours = plots.series_colours(len(group))
    outputs = list(dict.fromkeys(s[0] for r in group for s in r.samples))
    markers = plots.output_markers(outputs)
    items = []
    for r, label, colour in zip(group, labels, colours, strict=True):
        exact = sum(1 for s in r.samples if s[6])
        items.append(f"<span style='color:{colour}'>●</span> {_e(label)} ({r.cases} cases"
                     + (f", {exact} exact outputs)" if exact else ")"))
    keys = " ".join(f"{plots.MARKERS[markers[o]]} {_e(o)}" for o in outputs)
    return (f"<p class='meta'>{'; '.join(items)}</p>"
            f"<p class='meta'>outputs: {keys}</p>")


def _series_label(r: TargetResult) -> str:
    """A target in a picture of its op: name, claimed model, size regime."""
    regime = "" if r.regime == "small" else f", {r.regime}"
    return f"{r.target} ({r.precision}{regime})"


def _samples_table(r: TargetResult) -> str:
    """Without pictures: per output, cases and the worst ratio in each octave of n."""
    buckets: dict[tuple[str, int], list[float]] = {}
    for name, n, wd, wp, _md, _mp, _exact in r.samples:
        key = (name, max(n, 1).bit_length() - 1)
        b = buckets.setdefault(key, [0, 0.0, 0.0])
        b[0] += 1
        b[1], b[2] = max(b[1], wd), max(b[2], wp)
    rows = [[_e(name), f"2^{k}–2^{k + 1}", str(int(b[0])), _ratio(b[1]), _ratio(b[2])]
            for (name, k), b in sorted(buckets.items())]
    return _table(["output", "n", "cases", "worst det", "worst prob"], rows,
                  numeric=(2, 3, 4))


def write_html(path: Path | str, results: Sequence[TargetResult], *,
               title: str = "numoracle run", zoo: bool = False, examples: int | None = None,
               observed: str | None = None) -> Path:
    """Write ``report.html`` for the results of a run (or, with ``zoo``, of a zoo).

    Parameters
    ----------
    path : path
        The file to write; its folder is made.
    results : sequence of TargetResult
        What :func:`~numoracle.running.runner.run_target` returned per target.
    title : str
        The page's heading.
    zoo : bool
        The results are mutants: show caught/missed and cases to catch.
    examples : int, optional
        Cases per target asked for (where a missed mutant's bar ends).
    observed : str, optional
        Where Hypothesis observability records were written, to name on the page.

    Returns
    -------
    Path
        The file written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(results, title=title, zoo=zoo, examples=examples,
                             observed=observed), encoding="utf-8")
    return p
