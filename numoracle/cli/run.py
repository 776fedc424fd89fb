"""``numoracle run``: check every target available here (or those named) on
every op, each (target, op, size regime) a row with a fair share of the
budget (:mod:`numoracle.running.schedule`), in worker processes with ``-j``
(:mod:`numoracle.running.pool`); print a table, the message of each failure,
the warm-up and a totals line; ``--report DIR`` writes ``DIR/report.json``,
``DIR/report.html`` and ``DIR/run.json`` (the run in numbers). Exits 1 when
a row failed or a runnable row was left unjudged."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

from ..checking.report import results_table, write_json
from ..errors import InvalidArgument
from ..outcome import Outcome, RunVerdict
from ..reports import observing, write_html
from ..targets.target import Target
from ._common import (
    _progress,
    built_in,
    check_ops,
    names,
    ops_option,
    positive_float,
    positive_int,
    print_text,
    regime_shares,
    resolve_regime,
    run_options,
    run_settings,
    sharp_option,
    sharpened,
    skipped_line,
)

if TYPE_CHECKING:
    from ..running.runner import TargetResult
    from ..running.schedule import Row, RunPlan

__all__ = ["RUN_EXAMPLES", "RUN_BUDGET", "RUN_COLUMNS", "add_parser"]

#: most cases per target and op of ``numoracle run``
RUN_EXAMPLES = 2000
#: seconds ``numoracle run`` takes in all by default, shared among the targets
RUN_BUDGET = 60.0
RUN_COLUMNS = ("target", "op", "precision", "cases", "failures", "worst_ratio", "status",
               "time_s")
#: the run's exit status when every runnable row passed
ALL_PASSED = 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the subcommands."""
    run = sub.add_parser("run", help="check the targets available here")
    ops_option(run)
    run.add_argument("--targets", type=names, metavar="NAME,...",
                     help="targets to check (default: every one available here)")
    run_options(run, RUN_EXAMPLES, "target and op")
    run.add_argument("--budget", type=positive_float, default=RUN_BUDGET, metavar="SECONDS",
                     help=f"time for judging, shrinking and reporting, shared among the rows "
                          f"(target, op, size regime) (default {RUN_BUDGET:g} s); every row gets "
                          "--min-cases cases within its share before any row gets more; a "
                          "warm-up of one case per target runs before the clock")
    run.add_argument("-j", "--jobs", type=positive_int, metavar="N",
                     help="worker processes judging rows side by side (default: the cores "
                          "here, capped by memory; 1 judges in this process); the same seeds "
                          "give the same per-row results whatever N")
    run.add_argument("--min-cases", type=positive_int, default=20, metavar="N",
                     help="cases every row gets before any row gets more (default 20)")
    run.add_argument("--shrink-time", type=positive_float, metavar="SECONDS",
                     help="cap on the time shrinking one failure may take (default a tenth "
                          "of --budget, at least 1 s); the smallest failure found by then is "
                          "saved")
    sharp_option(run)
    run.add_argument("--regime", choices=("auto", "small", "realistic", "mixed"),
                     default="auto",
                     help="case sizes: small (cheap cases), realistic (the layer shapes "
                          "practitioners train at: conv2d from real CNNs, linear up to 8,192 "
                          "features, reductions up to 2**20), mixed (GPU targets spend 30%% "
                          "of their time on realistic shapes); auto (default): mixed where a "
                          "GPU target can run here, else small")
    run.add_argument("--diagnose", action="store_true",
                     help="also judge every case under every standard precision model and "
                          "show the precision each output really delivered (slower)")
    run.add_argument("--observability", action="store_true",
                     help="write Hypothesis observability records (.hypothesis/observed/) "
                          "for Tyche to show the case distribution")
    run.add_argument("--cluster", metavar="ADDRESS",
                     help="run blocks of cases as Ray tasks on the cluster at ADDRESS ('local' "
                          "starts Ray here; 'auto' or ray://HOST:PORT joins one) and merge them "
                          "into one report; needs `pip install 'numoracle[ray]'`")
    run.add_argument("--block-size", type=positive_int, metavar="N",
                     help="with --cluster: cases per Ray task (default 200)")
    run.add_argument("--task-timeout", type=positive_float, metavar="SECONDS",
                     help="with --cluster: seconds a block may take before it is cancelled "
                          "and reported unjudged (default 900)")
    traced = run.add_argument_group(
        "a PyTorch reference as the op",
        "--reference MOD:FN makes the function (or nn.Module class) FN of module MOD the op, "
        "traced to ATen and bounded one rule per ATen op, e.g. --reference mypkg.refs:softmax "
        "--inputs 'x=batch,n' --dims n=1:4096; it checks the kernel --kernel names (inputs by "
        "name, returns a dict: out, or out0, out1, ..., and grad_<input>), or else torch "
        "running the reference itself on the CPU (and CUDA where present)")
    traced.add_argument("--reference", metavar="MOD:FN",
                        help="the reference: a function or nn.Module class, as module:name "
                             "(importable from here) or file.py:name")
    traced.add_argument("--inputs", metavar="NAME=DIM,...;...",
                        help="the reference's tensor inputs with their dimensions: names or "
                             "sizes, e.g. 'x=batch,n;w=m,n' or 'x=batch,3,32,32'")
    traced.add_argument("--dims", metavar="DIM=LO:HI,...",
                        help="the range of each dimension, e.g. n=1:4096,batch=1:8")
    traced.add_argument("--integers", metavar="NAME=LO:HI,...",
                        help="inputs that hold integers (class labels, indices), drawn in "
                             "[LO, HI); ends are ints or dimension names, e.g. labels=0:n")
    traced.add_argument("--booleans", type=names, metavar="INPUT,...",
                        help="inputs that hold booleans (masks)")
    traced.add_argument("--grads", type=names, metavar="INPUT,...",
                        help="inputs whose gradients are judged too (grad_<input>)")
    traced.add_argument("--kernel", metavar="MOD:FN",
                        help="the kernel to check against --reference (default: torch), as "
                             "module:name (importable from here) or file.py:name")
    traced.add_argument("--backend",
                        help="with --kernel: where its arrays live (default torch-cpu)")
    traced.add_argument("--precision",
                        help="with --kernel: the precision it claims (default fp32)")
    run.set_defaults(func=_cmd_run)


def _traced_targets(args: argparse.Namespace) -> tuple[list[Target], list[str]]:
    """The targets and op of ``run --reference`` (the op registered on the way)."""
    from ..api import _make_target  # noqa: PLC0415 - torch only for references
    from ..kernels.torch_traced import reference_targets  # noqa: PLC0415
    from ..oracle.traced.op import resolve_reference, traced_op  # noqa: PLC0415

    if not args.inputs:
        raise InvalidArgument("--reference needs --inputs, e.g. --inputs 'x=batch,n'")
    inputs: dict[str, tuple[int | str, ...]] = {}
    for part in filter(None, (p.strip() for p in args.inputs.split(";"))):
        name, sep, dims = part.partition("=")
        if not sep:
            raise InvalidArgument(f"--inputs part {part!r} is not NAME=DIM,...; e.g. x=batch,n")
        inputs[name.strip()] = tuple(int(d) if d.strip().isdigit() else d.strip()
                                     for d in dims.split(",") if d.strip())
    ranges: dict[str, tuple[int, int]] = {}
    for part in filter(None, (p.strip() for p in (args.dims or "").split(","))):
        name, sep, span = part.partition("=")
        lo, colon, hi = span.partition(":")
        if not sep or not colon or not lo.isdigit() or not hi.isdigit():
            raise InvalidArgument(f"--dims part {part!r} is not DIM=LO:HI; e.g. n=1:4096")
        ranges[name.strip()] = (int(lo), int(hi))
    integers: dict[str, tuple[int | str, int | str]] = {}
    for part in filter(None, (p.strip() for p in (args.integers or "").split(","))):
        name, sep, span = part.partition("=")
        lo, colon, hi = span.partition(":")
        if not sep or not colon or not lo.strip() or not hi.strip():
            raise InvalidArgument(f"--integers part {part!r} is not NAME=LO:HI; e.g. "
                                  "labels=0:n")
        integers[name.strip()] = tuple(  # type: ignore[assignment]
            int(e) if e.strip().lstrip("-").isdigit() else e.strip() for e in (lo, hi))
    op = traced_op(resolve_reference(args.reference), inputs=inputs, dims=ranges,
                   grads=tuple(args.grads or ()), integers=integers,
                   booleans=tuple(args.booleans or ()))
    if args.kernel:
        fn = resolve_reference(args.kernel)
        return [_make_target(fn, op=op.name, precision=args.precision or "fp32",
                             backend=args.backend or "torch-cpu")], [op.name]
    return reference_targets(op.name), [op.name]


def _select_targets(names: Sequence[str] | None, ops: Sequence[str]) -> list[Target]:
    """The targets named (all when None) that compute one of ``ops``."""
    from ..kernels import all_targets  # noqa: PLC0415 - the CLI's list loads lazily

    everything = all_targets()
    known = sorted({t.name for t in everything})
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise InvalidArgument(f"--targets names unknown targets {unknown}; use names from "
                              f"{known} (see `numoracle list`)")
    chosen = [t for t in everything if (names is None or t.name in names) and t.op in ops]
    if not chosen:
        raise InvalidArgument(f"none of the targets {list(names or known)} computes {list(ops)}; "
                              "see `numoracle list` for which target computes which op")
    return chosen


#: options that act only beside another: (option, attribute, what it needs, its attribute)
_NEEDS = (
    ("--kernel", "kernel", "--reference", "reference"),
    ("--inputs", "inputs", "--reference", "reference"),
    ("--dims", "dims", "--reference", "reference"),
    ("--integers", "integers", "--reference", "reference"),
    ("--booleans", "booleans", "--reference", "reference"),
    ("--grads", "grads", "--reference", "reference"),
    ("--backend", "backend", "--kernel", "kernel"),
    ("--precision", "precision", "--kernel", "kernel"),
    ("--block-size", "block_size", "--cluster", "cluster"),
    ("--task-timeout", "task_timeout", "--cluster", "cluster"),
)


def check_combination(args: argparse.Namespace) -> None:
    """Refuse options that would be ignored: each of :data:`_NEEDS` without
    what it acts with, and ``--targets``/``--ops`` beside ``--reference``
    (whose op and targets are its own)."""
    for option, attr, needs, other in _NEEDS:
        if getattr(args, attr, None) is not None and getattr(args, other, None) is None:
            raise InvalidArgument(f"{option} acts only with {needs}, which is not given; "
                                  + ("e.g. --reference mypkg.refs:softmax --inputs 'x=batch,n' "
                                     "--kernel mykernels:softmax" if needs != "--cluster"
                                     else "give --cluster local (or an address), or drop "
                                          f"{option}"))
    if getattr(args, "reference", None):
        for option in ("targets", "ops"):
            if getattr(args, option, None) is not None:
                raise InvalidArgument(f"--{option} does not apply with --reference (it checks "
                                      "the reference's own op, on --kernel or on torch); "
                                      f"drop --{option}")


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    wall0 = time.perf_counter()
    check_combination(args)
    if getattr(args, "reference", None):
        targets, ops = _traced_targets(args)
        if args.isolate is None:  # the op lives in this process: judged here
            args.isolate = False
        args.jobs = 1
    else:
        ops = check_ops(args.ops)
        targets = _select_targets(args.targets, ops)
    args.regime = resolve_regime(getattr(args, "regime", "auto"), targets)
    if getattr(args, "sharp", False):
        targets = [sharpened(t) for t in targets]
    plan = None
    with observing(args.observability) as observed:
        if args.cluster is not None:  # Ray tasks, merged into the same results
            from ..running.cluster import cluster_results  # noqa: PLC0415 - Ray is optional

            results = cluster_results(targets, run_settings(args), console,
                                      address=args.cluster, block_size=args.block_size,
                                      task_timeout=args.task_timeout)
        else:
            plan = _scheduled(targets, args, console)
            results = plan.results
    ran = [r for r in results if r.verdict is not RunVerdict.SKIPPED]
    t_report = time.perf_counter()
    if args.report is not None:
        path = write_json(args.report / "report.json", [r.row() for r in results])
        console.print(f"report: {path}", markup=False)
        page = write_html(args.report / "report.html", results, examples=args.examples,
                          observed=None if observed is None else str(observed))
        took = time.perf_counter() - t_report
        console.print(f"report: {page} (written in {took:.1f} s)", markup=False)
        if plan is not None:  # the run in numbers: warm-up, judging, reporting, cases
            summary = plan.summary(time.perf_counter() - wall0, took)
            args.report.joinpath("run.json").write_text(json.dumps(summary, indent=2) + "\n")
    if observed is not None:
        console.print(f"observability records (Tyche): {observed}", markup=False)
    skipped = skipped_line(results)
    if skipped:
        print_text(console, skipped, style="yellow")
    if not ran:
        print_text(console, "no target could run here: nothing was checked", style="red")
        return 1
    columns = RUN_COLUMNS + (("effective",) if getattr(args, "diagnose", False) else ())
    rows = [r.row() for r in ran]
    for row in rows:  # realistic-size runs are rows of their own: say so beside the op
        if row.get("regime", "small") != "small":
            row["op"] = f"{row['op']} ({row['regime']})"
        if row.get("asked"):  # cases got of cases asked
            row["cases"] = f"{row['cases']}/{row['asked']}"
    console.print(results_table(rows, "numoracle run", columns))
    unjudged = [r for r in ran if r.status()[0] is Outcome.UNJUDGED]
    for r in ran:
        if r.verdict is RunVerdict.FAIL:
            print_text(console, r.message or r.diagnosis)
        elif r.status()[0] is not Outcome.PASS:
            print_text(console, f"{r.target} on {r.op}: {r.status()[0]}: {r.status()[1]}",
                       style="red")
    from ..running.schedule import totals_line  # noqa: PLC0415 - loaded by the run already

    if plan is not None:
        print_text(console, plan.warm_line())
    print_text(console, totals_line(results, plan, time.perf_counter() - wall0,
                                    min_cases=args.min_cases))
    if unjudged:
        print_text(console, f"{len(unjudged)} runnable row(s) were left unjudged: the run is "
                            "not a pass; give a larger --budget, fewer --targets or --ops, or "
                            "more --jobs", style="red")
    return ALL_PASSED if all(r.status()[0] is Outcome.PASS for r in ran) else 1


def _scheduled(targets: Sequence[Target], args: argparse.Namespace,
               console: Console) -> RunPlan:
    """Rows for ``targets``, warmed up, judged within ``--budget`` in
    ``--jobs`` processes; skipped targets come back as skipped rows, in
    target order."""
    from ..running.pool import default_jobs, run_pool  # noqa: PLC0415 - only when running
    from ..running.runner import run_target  # noqa: PLC0415 - hypothesis only when running
    from ..running.schedule import (  # noqa: PLC0415 - hypothesis only when running
        Row,
        RunPlan,
        judge_rows,
        warm_up,
    )

    settings = run_settings(args)
    isolate = settings.isolate
    rows: list[Row] = []
    slots: list[TargetResult | int] = []
    for t in targets:
        if t.unavailable_reason() is not None:
            slots.append(run_target(t))  # a skipped result, at once
            continue
        for regime, part in regime_shares(t, getattr(args, "regime", "small")):
            slots.append(len(rows))
            rows.append(Row(t, regime=regime, weight=part, asked=settings.examples,
                            isolate=not built_in(t) if isolate is None else isolate))
    jobs = args.jobs or default_jobs(len(rows))
    jobs = max(1, min(jobs, len(rows)))
    # the report's time comes out of the budget: a picture per op
    pictures = len({r.target.op for r in rows}) if args.report is not None else 0
    seconds = settings.judging_seconds(pictures)
    plan = RunPlan([], budget=settings.budget, jobs=jobs)
    if args.report is not None:  # matplotlib's import is a one-time cost: before the clock
        t0 = time.monotonic()
        from ..reports import plots  # noqa: PLC0415 - with the report only

        if plots.available() is None:
            import matplotlib.pyplot  # noqa: F401, PLC0415 - imported once, outside the budget
        plan.warm["report pictures (matplotlib)"] = time.monotonic() - t0
    with _progress(console) as progress:
        warming = progress.add_task(f"warming up {len({r.target.name for r in rows})} "
                                    f"targets on {jobs} process(es)", total=None)
        judging = progress.add_task(f"judging {len(rows)} rows on {jobs} process(es): cases",
                                    total=None, visible=False)

        def on_case(k: int, passed: bool) -> None:
            progress.advance(judging)

        def on_warm() -> None:
            progress.update(warming, visible=False)
            progress.update(judging, visible=True)

        if jobs == 1:
            t0 = time.monotonic()
            plan.warm.update(warm_up(rows, settings))
            plan.warm_seconds = time.monotonic() - t0
            on_warm()
            t1 = time.monotonic()
            judged = judge_rows(rows, seconds, settings,
                                on_case=lambda k, v: on_case(k, bool(v.passed)))
            plan.judge_seconds = time.monotonic() - t1
        else:
            judged, warm, plan.warm_seconds, plan.judge_seconds = run_pool(
                rows, seconds, settings, jobs, on_case=on_case, on_warm=on_warm,
                stats=plan.pool)
            plan.warm.update(warm)
    plan.warm_seconds += plan.warm.get("report pictures (matplotlib)", 0.0)
    plan.results = [judged[s] if isinstance(s, int) else s for s in slots]
    return plan
