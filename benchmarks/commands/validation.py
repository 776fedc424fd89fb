"""``validation``: the validation page (``docs/validation.md``) and the index of the
results (``benchmarks/results/README.md``), generated from the recorded runs.

    python -m benchmarks validation           # rewrite both
    python -m benchmarks validation --check   # exit 1 when the page is not what the results give

Every number on the page is computed here from a result file under
``benchmarks/results/`` and printed beside the path of that file: nothing is
retyped. A claim is a function of its files (:data:`SWEEPS`, :data:`ZOOS` and the
functions below); a recorded run that no claim reads is listed in the index as
an earlier or supporting run, and each finding (``results/findings/``) with the
first lines of its README.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "validation.md"
INDEX = RESULTS / "README.md"

_H4 = "h100/session4/"
_H5 = "h200x2/session5/"
#: soundness sweeps of correct targets: (what was swept, the result files pooled). A file
#: ``path:SEED`` is a run cut short (rows only) of that Hypothesis seed; runs of different
#: seeds add, and of two runs with one seed (target, op, limit) the later file is kept.
SWEEPS: list[tuple[str, tuple[str, ...]]] = [
    ("CPU targets under the size limits 256, 1,024, default and 262,144, every value family",
     ("cpu/limits/small/soundness.json", "cpu/limits/large/soundness.json",
      "cpu/limits/small_logic/soundness.json",
      *sorted(f"cpu/limits/more/{p.name}" for p in (RESULTS / "cpu/limits/more").glob("*.json")))),
    ("CUDA and CuPy targets under the same four size limits (H100, two H200s)",
     (f"{_H4}limits/limits/soundness_partial.json:4",
      f"{_H4}topup/limits/soundness_partial.json:5",
      f"{_H4}topup2/limits/soundness_partial.json:6",
      f"{_H4}topup2/difflogic_limits/soundness.json",
      f"{_H5}limits/limits/soundness_partial.json:4",
      f"{_H5}limits/difflogic_limits/soundness.json",
      f"{_H5}call2/limits/limits/soundness.json", f"{_H5}call2/topup/limits/soundness.json")),
    ("CPU targets at real layer sizes (realistic regime)",
     ("cpu/realistic/soundness.json", "cpu/realistic/topup1/soundness.json",
      "cpu/realistic/topup2/soundness.json")),
    ("GPU targets at real layer sizes (H100, H200)",
     ("h100/session3/realistic2/realistic/soundness.json",
      "h100/session3/sweeps/realistic/soundness.json",
      "h200x2/session5/call2/realistic/realistic/soundness_partial.json:8",
      "h100/session5/call3/realistic/realistic/soundness_partial.json:10",
      "h200x2/session6/call1/realistic/soundness_partial.json:11",
      "h100/session6/call2/realistic/realistic/soundness.json",
      "h100/session6/call3/realistic/realistic/soundness.json",
      "h100/session6/call6/realistic/realistic/soundness_partial.json:14",
      "h100/session6/call7/realistic/realistic/soundness.json")),
    ("GPU targets at real layer sizes under the current GPU reference kernels (H100)",
     ("h100/session8/call6/soundness_partial.json",)),
    ("every target of an H100 machine (GPU and its host CPU), small cases, reductions to 2^16",
     ("h100/final/soundness.json",)),
]

#: bug-zoo runs: (what ran, the zoo.json file)
ZOOS: list[tuple[str, str]] = [
    ("linear and conv2d mutants, deterministic bound", "cpu/zoo.json"),
    ("linear and conv2d mutants, probabilistic (sharp) bound", "cpu/sharp/zoo/zoo.json"),
    ("KAN layer and chain mutants", "cpu/kan/zoo_kan.json"),
    ("optimizer and training-step mutants (H100, GPU mutants included)",
     "h100/optim/run3/zoo/zoo.json"),
    ("linear mutants from an installed package without torch",
     "cpu/zoo_without_torch/zoo.json"),
    ("mutants of kernels checked against PyTorch references (traced oracle; families)",
     "cpu/traced/zoo.json"),
]


#: torch running each op family's PyTorch reference under the traced oracle:
#: (what ran, the soundness files pooled; a later file's (family, target, grads) replaces)
TRACED: list[tuple[str, tuple[str, ...]]] = [
    ("torch CPU, forward, fp32 (normalisation also bf16)",
     ("cpu/traced/forward_fp32/soundness.json",
      "cpu/traced/forward_fp32_attention_optimizer/soundness.json",
      "cpu/traced/forward_fp32_normalisation/soundness.json")),
    ("torch CPU, with gradients, bf16 (per-op claim)", ("cpu/traced/bf16_per_op/soundness.json",)),
    ("torch CUDA, forward, fp32, tf32 and bf16 (per-op claim), H100",
     ("h100/traced_sweep/sweep_forward/soundness.json",
      "h100/traced_sweep_rest/s1/soundness.json", "h100/traced_sweep_rest/s2/soundness.json")),
]

#: the KernelBench judge with each problem's own Model as the candidate: (what ran, files)
KERNELBENCH: list[tuple[str, tuple[str, ...]]] = [
    ("H100, official instances whole (sampled rows) or reduced, then drawn cases",
     ("h100/kernelbench_sampled/soundness.json", "h100/kernelbench_rest/soundness.json")),
]


def _load(path: str) -> Any:
    return json.loads((RESULTS / path).read_text())


def _link(spec: str) -> str:
    """A link from ``docs/`` to a result file or folder (``path:SEED`` names the seed)."""
    path, _, seed = spec.partition(":")
    return f"[`{path}`](../benchmarks/results/{path})" + (f" (seed {seed})" if seed else "")


def _rows(data: Any) -> list[dict[str, Any]]:
    return data["rows"] if isinstance(data, dict) else data


def pooled(specs: tuple[str, ...]) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """(target, op, limit) -> {seed: [cases, alarms, worst ratio]} over the files ``specs``."""
    cells: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for spec in specs:
        path, _, given = spec.partition(":")
        data = _load(path)
        command = data.get("meta", {}).get("command", "") if isinstance(data, dict) else ""
        found = re.search(r"--seed (\d+)", command)
        seed = given or (found.group(1) if found else path)  # unknown: the file alone
        per_file: dict[tuple[str, str, str], list[float]] = {}
        for r in _rows(data):
            if "skipped" in r or r.get("status") == "skipped":
                continue
            key = (r["target"], r["op"], str(r.get("max_elements", "")))
            c = per_file.setdefault(key, [0, 0, 0.0])
            c[0] += int(r["cases"])
            c[1] += int(r.get("failures", 0))
            c[2] = max(c[2], float(r.get("worst_ratio") or 0.0))
        for key, value in per_file.items():
            cells.setdefault(key, {})[seed] = value  # a later file replaces the same seed
    return cells


def sweep_line(title: str, specs: tuple[str, ...]) -> tuple[str, set[str]]:
    """One table row for the pooled sweep files: cells, cases, the fewest per cell, the
    cells below 2,000 cases, alarms (and where), the worst finite ratio; the files read."""
    cells = pooled(specs)
    totals = {k: [sum(v[0] for v in runs.values()), sum(v[1] for v in runs.values()),
                  max(v[2] for v in runs.values())] for k, runs in cells.items()}
    cases = sum(int(t[0]) for t in totals.values())
    fewest = min((int(t[0]) for t in totals.values()), default=0)
    below = sum(1 for t in totals.values() if t[0] < 2000)
    alarms = sum(int(t[1]) for t in totals.values())
    where = ", ".join(f"{tgt}/{op}" + (f"@{lim}" if lim not in ("", "default") else "")
                      + f": {int(t[1])}" for (tgt, op, lim), t in sorted(totals.items()) if t[1])
    finite = [t[2] for t in totals.values() if math.isfinite(t[2])]
    worst = max(finite, default=0.0)
    files = [spec.partition(":")[0] for spec in specs]
    sources = "<br>".join(_link(spec) for spec in specs)
    line = (f"| {title} | {len(cells)} | {cases:,} | {fewest:,} | {below} | {alarms}"
            f"{f' ({where})' if where else ''} | {worst:.3g} | {sources} |")
    return line, set(files)


def zoo_line(title: str, path: str) -> tuple[str, set[str]]:
    """One table row for a zoo run: mutants, caught, skipped, the most cases to catch."""
    rows = _rows(_load(path))
    ran = [r for r in rows if r.get("status", "caught" if r["caught"] else "missed") != "skipped"]
    caught = [r for r in ran if r["caught"]]
    most = max((int(r["cases_to_catch"]) for r in caught if r["cases_to_catch"]), default=0)
    ops = ", ".join(sorted({r.get("op") or r.get("family", "?") for r in rows}))
    return (f"| {title} | {ops} | {len(ran)} | {len(caught)} | {most} | {_link(path)} |",
            {path})


def calibration_text() -> tuple[str, set[str]]:
    """The sharp mode's false-alarm count against its budget, and where it breaks."""
    path = "cpu/sharp/calibration.json"
    data = _load(path)
    lines = []
    for run in data["runs"]:
        t = run["total"]
        lines.append(f"- {run['target']} ({run['op']}): {int(t['cases']):,} outputs, "
                     f"{int(t['elements']):,} elements; {int(t['prob_exceed'])} beyond the "
                     f"probabilistic bound where α × elements is {t['expected_prob_exceed']:.3g}; "
                     f"{int(t['det_exceed'])} beyond the deterministic one.")
    last = data["correlated_limit"][-1]
    lines.append(f"- Where its assumption fails (correlated rounding errors: a sequential "
                 f"float32 sum of one repeated value), at n = {last['n']:,} the error is "
                 f"{last['prob_ratio']:.3g}× the probabilistic bound and "
                 f"{last['det_ratio']:.3g}× the deterministic one.")
    return "\n".join(lines) + f"\n\nFrom {_link(path)}.", {path}


def cost_text() -> tuple[str, set[str]]:
    """The reference's time and memory, and gradcheck's beside it."""
    lin, conv = "cpu/oracle_cost.json", "cpu/conv_cost.json"
    a, b = _load(lin), _load(conv)
    cpu, gc = a["cpu"], a["on_gradcheck_largest"]
    shape = "×".join(map(str, cpu["shape"]))
    lines = [f"- linear backward (batch × in × out = {shape}), every output with its bound: "
             f"median {cpu['median_s']:.3g} s, peak memory {cpu['peak_over_io']:.2f}× the "
             f"float64 size of the case's inputs and outputs ({_link(lin)}).",
             f"- `torch.autograd.gradcheck`'s largest linear layer within its time limit, "
             f"{'×'.join(map(str, gc['shape']))}: {gc['gradcheck_s']:.3g} s; numoracle's "
             f"reference there {gc['numoracle_s'] * 1e3:.3g} ms ({_link(lin)}).",
             f"- conv2d, seed 000's case ({b['seed000_case']}): all four outputs "
             f"{b['seed000_all_outputs_s']:.3g} s, `grad_weight` alone "
             f"{b['seed000_grad_weight_s'] * 1e3:.3g} ms; gradcheck's largest conv2d within "
             f"its limit took {b['on_gradcheck_largest']['gradcheck_s']:.3g} s, numoracle "
             f"{b['on_gradcheck_largest']['numoracle_s'] * 1e3:.3g} ms ({_link(conv)})."]
    return "\n".join(lines), {lin, conv}


def speed_text() -> tuple[str, set[str]]:
    """The oracle's time over plain float64 products of the same outputs."""
    paths = ("cpu/oracle_speed/session8_final_run1.json",
             "cpu/oracle_speed/session8_final_run2.json")
    lines = []
    for path in paths:
        data = _load(path)
        for row in data.get("linear", []):
            if row["case"].endswith("fp32 target"):
                lines.append(f"- {row['case']} at {'×'.join(map(str, row['shape']))} "
                             f"({data.get('cpu_cores', '?')} CPU cores, median of "
                             f"{row['repeats']}): {row['oracle_s'] * 1e3:.3g} ms against "
                             f"{row['plain_float64_s'] * 1e3:.3g} ms, {row['ratio']:.3g}×; "
                             f"peak memory {row['peak_over_io']:.3g}× the case "
                             f"({_link(path)}).")
    return "\n".join(lines), set(paths)


def isolation_text() -> tuple[str, set[str]]:
    """The fault table: each hostile kernel's outcome, in-process and isolated."""
    path = "cpu/isolation/isolation.json"
    data = _load(path)
    faults = data["faults"]
    judged = [r for r in faults if r["repro"] and r["next_check"] == "pass"]
    lost = [r for r in faults if not r["repro"]]
    lines = [f"- {len(judged)} of {len(faults)} (fault, mode) rows end in a failing verdict "
             "with a saved repro, and a correct kernel checked next in the same process "
             f"passes: {', '.join(sorted({r['fault'] for r in judged}))}."]
    lines += [f"- {r['fault']} {r['mode']}: {r['outcome']}." for r in lost]
    small = next((r for r in data["overhead"] if "overhead_ms" in r), None)
    if small is not None:
        lines.append(f"- Isolation's cost per kernel call on a small case ({small['what']}): "
                     f"{small['overhead_ms']:.3g} ms (median), "
                     f"{small['min_overhead_ms']:.3g} ms (least).")
    return "\n".join(lines) + f"\n\nFrom {_link(path)}.", {path}


def findings_text() -> tuple[str, set[str]]:
    """Each finding's folder with the first paragraph of its README (or its repro's target)."""
    lines, read = [], set()
    for folder in sorted(p for p in (RESULTS / "findings").iterdir() if p.is_dir()):
        rel = f"findings/{folder.name}"
        read.add(rel)
        readme = folder / "README.md"
        summary = ""
        if readme.is_file():
            text = readme.read_text().split("\n\n")
            title = text[0].lstrip("# ").strip()
            body = next((p for p in text[1:] if p.strip() and not p.startswith("#")), "")
            summary = f"**{title}.** " + " ".join(body.split())[:600]
        elif (folder / "repro.json").is_file():
            repro = json.loads((folder / "repro.json").read_text())
            target = repro.get("target", {})
            summary = (f"a replayable repro of {target.get('name', '?')} on "
                       f"{target.get('op', '?')} (`numoracle replay`)")
        else:
            summary = "replayable repros and `show.py`"
        lines.append(f"- {_link(rel)}: {summary}")
    return "\n".join(lines), read


def traced_text() -> tuple[str, set[str]]:
    """Per run: (family, target) cells, cases, the fewest per cell, alarms, worst ratio."""
    lines = ["| run | cells | cases | fewest per cell | alarms | worst ratio | recorded in |",
             "|---|---|---|---|---|---|---|"]
    read: set[str] = set()
    for title, paths in TRACED:
        cells: dict[tuple[str, str, bool], dict[str, Any]] = {}
        for path in paths:
            read.add(path)
            for r in _rows(_load(path)):
                if r.get("status") in ("pass", "alarm"):
                    cells[(r["family"], r["target"], bool(r.get("grads")))] = r
        cases = [int(r["cases"]) for r in cells.values()]
        alarms = {k: int(r["failures"]) for k, r in cells.items() if r["failures"]}
        where = ", ".join(f"{f}/{t}: {n}" for (f, t, _), n in sorted(alarms.items()))
        worst = max((float(r["worst_ratio"] or 0.0) for r in cells.values()), default=0.0)
        lines.append(f"| {title} | {len(cells)} | {sum(cases):,} | {min(cases, default=0):,} "
                     f"| {sum(alarms.values())}{' (' + where + ')' if where else ''} | "
                     f"{math.floor(worst * 1000) / 1000:.3f} | "
                     f"{', '.join(_link(p) for p in paths)} |")
    note = ("A cell is an (op family, target, gradients or not) over 1,000 or 300 cases; a "
            "later file's cell replaces an earlier one's (a rerun after a fix of the rules, "
            "which the README beside each file names). The worst ratio is rounded down.\n")
    return note + "\n" + "\n".join(lines), read


def kernelbench_text() -> tuple[str, set[str]]:
    """Per run and claim: problems judged, passed, false alarms (which), over the time limit."""
    lines: list[str] = []
    read: set[str] = set()
    for title, paths in KERNELBENCH:
        lines.append(f"{title}:\n")
        for path in paths:
            read.add(path)
            rows = _rows(_load(path))
            claims = sorted({c for r in rows for c in r if isinstance(r[c], dict)})
            for c in claims:
                got = [(r["problem"], r[c]) for r in rows if isinstance(r.get(c), dict)]
                judged = [(p, v) for p, v in got if v.get("status") in ("pass", "fail")]
                fails = [p for p, v in judged if v["status"] == "fail"]
                late = sum(1 for _, v in got if v.get("status") == "timeout")
                lines.append(f"- {_link(path)}, {c}: {len(judged)} problems judged, "
                             f"{len(judged) - len(fails)} pass, {len(fails)} false alarms"
                             f"{' (' + ', '.join(fails) + ')' if fails else ''}, "
                             f"{late} over the time limit.")
    return "\n".join(lines), read


HEADER = """# What was measured

This page is generated by `python -m benchmarks validation` from the runs recorded
under `benchmarks/results/`; every number is computed from the file linked beside
it, which names the command and the machine that made it. Do not edit it by hand.
`benchmarks/results/README.md` indexes every recorded run.
"""


def page() -> tuple[str, set[str]]:
    """The validation page's text, and the result paths it reads."""
    read: set[str] = set()
    parts = [HEADER, "## Soundness: correct kernels raise no alarm\n",
             "Each row pools the sweeps of its files: a cell is a (target, op, size limit); "
             "runs of different Hypothesis seeds add, a seed run twice counts once. An "
             "alarm is a case outside its bound; the README of each run says what it was (a "
             "defect of the oracle then, fixed since, or a finding below, which the targets "
             "now declare). The worst ratio is the largest finite err/bound recorded, alarms "
             "included.\n",
             "| sweep | cells | cases | fewest per cell | cells under 2,000 | alarms | "
             "worst ratio | recorded in |", "|---|---|---|---|---|---|---|---|"]
    for title, paths in SWEEPS:
        line, used = sweep_line(title, paths)
        parts.append(line)
        read |= used
    parts += ["", "## Sharpness: the bug zoo is caught\n",
              "Every mutant is one plausible bug; the default strategies must catch it.\n",
              "| zoo run | ops | mutants run | caught | most cases to catch | recorded in |",
              "|---|---|---|---|---|---|"]
    for title, path in ZOOS:
        line, used = zoo_line(title, path)
        parts.append(line)
        read |= used
    sections: list[tuple[str, Callable[[], tuple[str, set[str]]]]] = [
        ("PyTorch references: torch itself judged by the traced oracle", traced_text),
        ("KernelBench: each problem's own Model judged as a candidate", kernelbench_text),
        ("The probabilistic (sharp) bound's calibration", calibration_text),
        ("Hostile kernels: crashes, hangs and writes are verdicts", isolation_text),
        ("What the oracle costs", cost_text),
        ("The oracle's speed against plain float64", speed_text),
        ("Findings in libraries, made by the oracle on its own", findings_text),
    ]
    for title, make in sections:
        text, used = make()
        parts += ["", f"## {title}\n", text]
        read |= used
    return "\n".join(parts) + "\n", read


def _folders(read: set[str]) -> set[str]:
    """The folders (relative to results/) holding the files a claim read."""
    out = set()
    for path in read:
        p = Path(path)
        out.add(str(p if (RESULTS / p).is_dir() else p.parent))
    return out


def index(read: set[str]) -> str:
    """The results index: every folder two levels deep and every top-level file,
    marked current (read by the validation page), finding, or earlier."""
    current = _folders(read)
    lines = ["# Recorded results", "",
             "Generated by `python -m benchmarks validation`. Each folder holds the output of "
             "runs with the command and machine that made them (its README or the `meta` of "
             "its JSON). **current**: read by [docs/validation.md](../../docs/validation.md); "
             "**finding**: a behaviour of a library found by the oracle, with a replayable "
             "repro; **earlier**: a run the current ones supersede or one that supports a "
             "document (docs/*.md), kept as recorded.", "",
             "| path | status | what |", "|---|---|---|"]
    entries = sorted({p.relative_to(RESULTS) for p in RESULTS.glob("*/*") if p.is_dir()}
                     | {p.relative_to(RESULTS) for p in RESULTS.glob("*") if p.is_dir()}
                     | {p.relative_to(RESULTS) for p in RESULTS.glob("*/*")
                        if p.is_file() and p.name != "README.md"})
    for rel in entries:
        name = str(rel)
        if name.startswith("findings"):
            status = "finding" if "/" in name else "findings"
        elif name in current or any(c.startswith(name + "/") or c == name for c in current) \
                or any(r == name for r in read):
            status = "current"
        else:
            status = "earlier"
        what = ""
        readme = RESULTS / rel / "README.md"
        if readme.is_file():
            what = readme.read_text().split("\n", 1)[0].lstrip("# ").strip()
        lines.append(f"| `{name}` | {status} | {what} |")
    return "\n".join(lines) + "\n"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``validation`` to the harness's subcommands."""
    ap = sub.add_parser("validation", help="generate docs/validation.md and the results index "
                                           "from benchmarks/results")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when docs/validation.md differs from what "
                         "the results give (the index lists new runs when it is rewritten)")
    ap.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Write (or with ``--check`` compare) the page and the index."""
    text, read = page()
    wanted = {PAGE: text, INDEX: index(read)}
    if a.check:
        stale = [str(PAGE.relative_to(ROOT))] if not PAGE.is_file() \
            or PAGE.read_text() != text else []
        if stale:
            print(f"out of date: {', '.join(stale)}; run python -m benchmarks validation",
                  file=sys.stderr)
            return 1
        return 0
    for path, t in wanted.items():
        path.write_text(t)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0
