"""Sharpness table: how close correct kernels come to their bounds, per op and output.

For every correct CPU target (each ``(target, op)`` of the registry that runs
here) the command draws cases from the default strategy, runs the kernel, and
judges every element of every output against the oracle's deterministic and
probabilistic bounds. Per ``(target, op, output)`` it reports, over the judged
elements (finite, bound positive: exact-regime elements, bound 0, are counted
apart and must be bit-exact), the worst ``err / bound`` and its 99th
percentile, under both bounds, and the 99th percentile of the cases' worst
ratios. A bound that correct kernels never come near is a loose bound: it lets
bugs of that size pass, and this table shows where.

The algorithms that are not summations get their own rows: float32 emulations
of Winograd ``F(m, r)`` (forward ``F(2, 3)``, ``F(4, 3)``, ``F(6, 3)``; filter
gradient ``F(3, 2)``, ``F(3, 4)``, ``F(5, 5)``) and of an FFT convolution
(``torch.fft``), judged under claims that allow them.

Large outputs are sampled: at most ``--elements`` elements per output and case
(drawn at random, the worst one always kept), so every case weighs about the
same in the percentiles.

    python -m benchmarks sharpness [--cases 60] [--seed 0] [--targets a,b]
                                   [--out benchmarks/results/cpu/sharpness] [--label NAME]

                                   [--repros GLOB]

Writes ``DIR/sharpness-LABEL.json`` and ``DIR/sharpness-LABEL.md``; with
``--repros``, the recorded outputs of stored conv2d repros judged again
(``DIR/repros-LABEL.json``).
"""

from __future__ import annotations

import argparse
import glob
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.record import meta, write_json, write_text
from numoracle.cases.case import Case
from numoracle.checking.check import judge, run_kernel
from numoracle.errors import UnsupportedCase
from numoracle.kernels import available_targets, get_target
from numoracle.oracle.ops import get_op
from numoracle.oracle.precision import get_model
from numoracle.oracle.transforms import winograd_matrices
from numoracle.running.draws import draw_cases
from numoracle.store.repro import load_repro

__all__ = ["add_parser", "run", "rejudge_repros", "collect_target", "transform_rows",
           "summarise", "to_markdown"]

#: elements of one output of one case kept for the percentiles
DEFAULT_ELEMENTS = 2048


def _ratios(got: np.ndarray, ref: Any, keep: int, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per judged element, ``err / bound`` under the deterministic and the
    probabilistic bound (a sample of at most ``keep``, the worst kept), the
    count of exact-regime elements and of those that were not bit-exact."""
    value = np.asarray(ref.value, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got - value - (0.0 if ref.lo is None else ref.lo))
    det, prob = np.asarray(ref.bound(False)), np.asarray(ref.bound(True))
    det, prob = np.broadcast_to(det, value.shape), np.broadcast_to(prob, value.shape)
    finite = np.isfinite(value) & np.isfinite(got) & np.isfinite(det) & np.isfinite(prob)
    exact = finite & (det == 0)
    judged = finite & (det > 0) & (prob > 0)
    rd, rp = (err[judged] / det[judged]), (err[judged] / prob[judged])
    if rd.size > keep:
        pick = rng.choice(rd.size, keep - 1, replace=False)
        top = int(np.argmax(rd))
        pick = np.append(pick, top)
        rd, rp = rd[pick], rp[pick]
    return rd, rp, int(exact.sum()), int((exact & (err != 0)).sum())


def collect_target(name: str, op: str, cases: int, seed: int, keep: int) -> dict[str, Any]:
    """Draw ``cases`` cases of ``(name, op)``, run the kernel and collect per
    output the sampled ratios (``_det``, ``_prob``, ``_case_det``, ``_case_prob``:
    raw, see :func:`summarise`)."""


    target = get_target(name, op)
    reason = target.unavailable_reason()
    if reason:
        return {"target": name, "op": op, "skipped": reason}
    ref_op = get_op(op)
    model = target.precision
    rng = np.random.default_rng(seed)
    outs: dict[str, dict[str, Any]] = {}
    state = {"cases": 0, "faults": 0, "unjudged": 0}
    t0 = time.perf_counter()

    def judge_one(case: Case) -> None:
        inputs = case.inputs()
        got, _ = run_kernel(case, target, inputs)
        if got is None:
            state["faults"] += 1
            return
        try:
            refs = ref_op.reference(inputs, case.params, model, tuple(got))
        except UnsupportedCase:
            state["unjudged"] += 1
            return
        state["cases"] += 1
        for out_name, ref in refs.items():
            rd, rp, n_exact, exact_bad = _ratios(got[out_name], ref.to_host(), keep, rng)
            o = outs.setdefault(out_name, {"_det": [], "_prob": [], "_case_det": [],
                                           "_case_prob": [], "exact_elements": 0,
                                           "exact_not_bit_exact": 0, "max_n": 0,
                                           "judged_cases": 0})
            o["exact_elements"] += n_exact
            o["exact_not_bit_exact"] += exact_bad
            o["max_n"] = max(o["max_n"], int(ref.max_n))
            if rd.size:
                o["judged_cases"] += 1
                o["_det"].append(rd)
                o["_prob"].append(rp)
                o["_case_det"].append(float(rd.max()))
                o["_case_prob"].append(float(rp.max()))

    for case in draw_cases(target, cases, seed):
        judge_one(case)
    return {"target": name, "op": op, "model": model.describe(), "cases": state["cases"],
            "faults": state["faults"], "unjudged": state["unjudged"],
            "seconds": round(time.perf_counter() - t0, 1), "outputs": outs}


def _stats(parts: list[np.ndarray], case_worst: list[float]) -> dict[str, float | int]:
    if not parts:
        return {"elements": 0}
    allr = np.concatenate(parts)
    return {"elements": int(allr.size), "worst": float(allr.max()),
            "p99": float(np.percentile(allr, 99)), "median": float(np.median(allr)),
            "p99_case_worst": float(np.percentile(case_worst, 99))}


def summarise(row: dict[str, Any]) -> dict[str, Any]:
    """The row as written: per output the statistics of the raw ratios."""
    if "outputs" not in row:
        return row
    outs = {}
    for k, o in row["outputs"].items():
        outs[k] = {key: v for key, v in o.items() if not key.startswith("_")}
        outs[k]["det"] = _stats(o["_det"], o["_case_det"])
        outs[k]["prob"] = _stats(o["_prob"], o["_case_prob"])
    return {**row, "outputs": outs}


# -- transform algorithms: float32 emulations ------------------------------------------

def _mats(m: int, r: int, dtype: Any) -> tuple[np.ndarray, ...]:

    return tuple(np.array([[float(v) for v in row] for row in mat], dtype=dtype)
                 for mat in winograd_matrices(m, r))


def winograd_forward_fp32(x: np.ndarray, w: np.ndarray, pad: int, m: int, r: int
                          ) -> np.ndarray:
    """A float32 Winograd ``F(m×m, r×r)`` forward (stride 1, one group), every
    stage rounded to float32, the channel sum in float32."""
    f32 = np.float32
    at, g, bt = _mats(m, r, f32)
    n, c, h, wd = x.shape
    o = w.shape[0]
    ho, wo = h + 2 * pad - r + 1, wd + 2 * pad - r + 1
    th, tw = -(-ho // m), -(-wo // m)
    a = m + r - 1
    xp = np.zeros((n, c, (th - 1) * m + a, (tw - 1) * m + a), dtype=f32)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    u = (g @ w.astype(f32) @ g.T).astype(f32)
    y = np.zeros((n, o, th * m, tw * m), dtype=f32)
    for i in range(th):
        for j in range(tw):
            v = (bt @ xp[:, :, i * m:i * m + a, j * m:j * m + a] @ bt.T).astype(f32)
            mm = np.einsum("ncab,ocab->noab", v, u).astype(f32)
            y[:, :, i * m:(i + 1) * m, j * m:(j + 1) * m] = at @ mm @ at.T
    return y[:, :, :ho, :wo]


def winograd_wgrad_fp32(x: np.ndarray, g: np.ndarray, pad: int, m: int, r: int) -> np.ndarray:
    """A float32 Winograd filter gradient ``(O, C, m, m)`` by ``F(m, r)`` over
    ``r × r`` tiles of ``g``, the batch and tiles summed in float32 in order."""
    f32 = np.float32
    at, gm, bt = _mats(m, r, f32)
    n, c, h, wd = x.shape
    o, ho, wo = g.shape[1:]
    a = m + r - 1
    th, tw = -(-ho // r), -(-wo // r)
    gp = np.zeros((n, o, th * r, tw * r), dtype=f32)
    gp[:, :, :ho, :wo] = g
    xp = np.zeros((n, c, (th - 1) * r + a, (tw - 1) * r + a), dtype=f32)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    acc = np.zeros((o, c, a, a), dtype=f32)
    for i in range(th):
        for j in range(tw):
            v = (bt @ xp[:, :, i * r:i * r + a, j * r:j * r + a] @ bt.T).astype(f32)
            u = (gm @ gp[:, :, i * r:(i + 1) * r, j * r:(j + 1) * r] @ gm.T).astype(f32)
            acc = (acc + np.einsum("ncab,noab->ocab", v, u)).astype(f32)
    return (at @ acc @ at.T).astype(f32)


def fft_forward_fp32(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """A float32 FFT correlation (``torch.fft``, stride 1, one group)."""

    h, wd = x.shape[2:]
    k = w.shape[-1]
    xt = torch.nn.functional.pad(torch.tensor(x, dtype=torch.float32), (pad,) * 4)
    shape = tuple(1 << int(np.ceil(np.log2(s + k - 1))) for s in (h + 2 * pad, wd + 2 * pad))
    fx = torch.fft.rfft2(xt, s=shape)[:, None]
    fw = torch.fft.rfft2(torch.tensor(w, dtype=torch.float32), s=shape)[None]
    full = torch.fft.irfft2((fx * fw.conj()).sum(2), s=shape)
    return full[:, :, :h + 2 * pad - k + 1, :wd + 2 * pad - k + 1].numpy()


def transform_rows(seeds: int, keep: int) -> list[dict[str, Any]]:
    """Rows of the emulated transform algorithms: per (algorithm, output) the
    ratios under a claim that allows it, over ``seeds`` random cases (normal
    values, 2–16 channels, maps 8–14)."""

    conv = get_op("conv2d")
    rows = []
    specs = [(f"winograd F({m},{r})", "winograd", "y", m, r) for m, r in
             ((2, 3), (4, 3), (6, 3), (2, 5), (4, 5))]
    specs += [(f"winograd F({m},{r})", "winograd", "grad_weight", m, r) for m, r in
              ((3, 2), (3, 4), (5, 5))]
    specs += [("fft", "fft", "y", 0, 3)]
    for label, algo, out, m, r in specs:
        k = m if out == "grad_weight" else r
        model = get_model("fp32", algorithm=algo)
        rng = np.random.default_rng(0)
        row: dict[str, Any] = {"target": f"emulated fp32 {label}", "op": "conv2d",
                               "model": model.describe(), "cases": seeds, "faults": 0}
        o = {"_det": [], "_prob": [], "_case_det": [], "_case_prob": [], "exact_elements": 0,
             "exact_not_bit_exact": 0, "max_n": 0, "judged_cases": 0}
        t0 = time.perf_counter()
        for s in range(seeds):
            srng = np.random.default_rng(1000 + s)
            c, size = int(srng.integers(2, 17)), int(srng.integers(8, 15))
            params = conv.validate({"batch": 2, "in_channels": c, "out_channels": 4,
                                    "height": size, "width": size, "kernel_size": (k, k),
                                    "padding": (k // 2, k // 2), "bias": False})
            inputs = {name: srng.standard_normal(sh).astype(np.float32).astype(np.float64)
                      for name, sh in conv.input_shapes(params).items()}
            x32 = inputs["x"].astype(np.float32)
            if out == "grad_weight":
                got = winograd_wgrad_fp32(x32, inputs["grad_output"].astype(np.float32),
                                          k // 2, m, r)
            elif algo == "fft":
                got = fft_forward_fp32(x32, inputs["weight"].astype(np.float32), k // 2)
            else:
                got = winograd_forward_fp32(x32, inputs["weight"].astype(np.float32),
                                            k // 2, m, r)
            ref = conv.reference(inputs, params, model, (out,))[out]
            rd, rp, _, _ = _ratios(got, ref, keep, rng)
            o["max_n"] = max(o["max_n"], int(ref.max_n))
            if rd.size:
                o["judged_cases"] += 1
                o["_det"].append(rd)
                o["_prob"].append(rp)
                o["_case_det"].append(float(rd.max()))
                o["_case_prob"].append(float(rp.max()))
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["outputs"] = {out: o}
        rows.append(row)
    return rows


def rejudge_repros(pattern: str) -> list[dict[str, Any]]:
    """The recorded outputs of stored conv2d repros (``pattern``: a glob of repro
    folders) judged again at this code, under the claimed formats with every
    algorithm class allowed: the worst err/bound per output of real library
    results that a transform algorithm computed."""
    rows = []
    for d in sorted(glob.glob(pattern, recursive=True)):
        rep = load_repro(d)
        if not rep.got or rep.op != "conv2d":
            continue
        model = rep.model
        if set(model.algorithms) == {"summation"}:
            model = model.with_(algorithms=("summation", "winograd", "fft"))
        outs = judge(rep.case, model, rep.inputs, rep.got, with_diagnosis=False)
        rows.append({"repro": d, "target": rep.target_name, "model": model.describe(),
                     "params": dict(rep.case.params),
                     "worst": {k: v.worst_ratio for k, v in outs.items()}})
    return rows


def to_markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "",
             "Per output, over the judged elements (bound > 0) of correct kernels: err/bound "
             "worst, 99th percentile (elements), 99th percentile of the cases' worst; "
             "deterministic (det) and probabilistic (prob) bounds. Exact-regime elements "
             "(bound 0) counted apart: 'not bit-exact' must be 0.", "",
             "| target | op | output | cases | longest n | det worst | det p99 | "
             "det p99 case-worst | prob worst | prob p99 | prob p99 case-worst | "
             "exact-regime elements | not bit-exact |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(d: dict[str, Any], key: str) -> str:
        return f"{d[key]:.3g}" if key in d else "-"
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['target']} | {r['op']} | skipped: {r['skipped']} |"
                         + " |" * 10)
            continue
        for name, o in r["outputs"].items():
            d, p = o["det"], o["prob"]
            lines.append(
                f"| {r['target']} | {r['op']} | {name} | {r['cases']} | {o['max_n']} | "
                f"{f(d, 'worst')} | {f(d, 'p99')} | {f(d, 'p99_case_worst')} | "
                f"{f(p, 'worst')} | {f(p, 'p99')} | {f(p, 'p99_case_worst')} | "
                f"{o['exact_elements']} | {o['exact_not_bit_exact']} |")
    return "\n".join(lines) + "\n"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``sharpness`` to the harness's subcommands."""
    ap = sub.add_parser("sharpness", help="err/bound of correct kernels per op and output: "
                                          "worst and 99th percentile under both bounds")
    ap.add_argument("--cases", type=int, default=60, help="cases per (target, op)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default="", help="comma-separated target names (all: empty)")
    ap.add_argument("--ops", default="", help="comma-separated ops (all: empty)")
    ap.add_argument("--elements", type=int, default=DEFAULT_ELEMENTS,
                    help="elements per output and case kept for the percentiles")
    ap.add_argument("--transform-cases", type=int, default=8,
                    help="cases per emulated transform algorithm (0: none)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu/sharpness"))
    ap.add_argument("--label", default="current")
    ap.add_argument("--repros", default="",
                    help="a glob of stored conv2d repro folders to judge again instead")
    ap.add_argument("--cudnn-winograd", choices=("run", "judge", "diagnose"), default=None,
                    help="instead: cuDNN's fp32 5x5 filter gradient (benchmarks.sharp.winograd)"
                         ": run it on the GPU and save it to --saved, or judge or diagnose the "
                         "saved one into --out/LABEL.json or --out/diagnosis-LABEL.json")
    ap.add_argument("--saved", type=Path, default=None,
                    help="with --cudnn-winograd: the .npz of cuDNN's outputs")
    ap.set_defaults(func=run)


def _cudnn_winograd(args: argparse.Namespace) -> int:
    from benchmarks.sharp import winograd  # noqa: PLC0415 - needs torch

    if args.saved is None:
        print("sharpness --cudnn-winograd: give --saved FILE.npz (cuDNN's outputs)")
        return 2
    if args.cudnn_winograd == "run":
        winograd.run(args.saved)
    elif args.cudnn_winograd == "judge":
        winograd.judge_saved(args.saved, args.out / f"{args.label}.json")
    else:
        winograd.diagnose_saved(args.saved, args.out / f"diagnosis-{args.label}.json")
    return 0


def run(args: argparse.Namespace) -> int:
    """Write ``sharpness-LABEL.json`` and ``.md`` (or ``repros-LABEL.json``) under ``--out``."""
    if args.cudnn_winograd:
        return _cudnn_winograd(args)
    if args.repros:
        found = rejudge_repros(args.repros)
        write_json(args.out / f"repros-{args.label}.json", {**meta(args.argv), "rows": found})
        for r in found:
            print(r["repro"], r["worst"])
        return 0
    names = {t for t in args.targets.split(",") if t}
    ops = {t for t in args.ops.split(",") if t}
    rows = []
    t0 = time.perf_counter()
    for t in available_targets():
        if (names and t.name not in names) or (ops and t.op not in ops):
            continue
        row = summarise(collect_target(t.name, t.op, args.cases, args.seed, args.elements))
        rows.append(row)
        print(f"{t.name} / {t.op}: {row.get('cases', 0)} cases, {row.get('seconds', 0)} s",
              flush=True)
    if args.transform_cases and (not ops or "conv2d" in ops) and not names:
        rows += [summarise(r) for r in transform_rows(args.transform_cases, args.elements)]
    record = meta(args.argv, cases=args.cases, seed=args.seed,
                  elements_per_output_case=args.elements,
                  seconds=round(time.perf_counter() - t0, 1))
    write_json(args.out / f"sharpness-{args.label}.json", {"meta": record, "rows": rows})
    header = (f"# Sharpness ({args.label}): err/bound of correct kernels\n\n"
              f"`{record['command']}` at {record['commit']}; {record['machine']}; "
              f"{record['seconds']} s")
    write_text(args.out / f"sharpness-{args.label}.md", to_markdown(rows, header))
    return 0
