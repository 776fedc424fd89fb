"""The verdict on one candidate for one problem: pass, fail, abstain or refused.

:func:`judge` runs the official case first, then cases drawn by Hypothesis
(other sizes, value families, layouts, drawn parameters), stopping at the
first failure, which Hypothesis shrinks to the smallest failing case. Every
case runs the candidate in its own worker process (:mod:`.candidate`; a fresh
process per candidate file) and judges the second call's outputs against the
traced oracle's bound under the claimed precision: ``|got − exact| / bound < 1``
per element, where ``exact`` is ``Model.forward`` evaluated in float64 (never
torch's own output) and the bound follows from one rule per ATen op.

Beside the oracle's verdict each case records KernelBench's own rule on the
same outputs: ``torch.allclose(torch_out, got, atol=tol, rtol=tol)`` for
``tol`` in 1e-2 and 1e-4, against torch's output of ``Model`` in the claimed
storage format (as KernelBench compares).

What a judgement says
---------------------
``pass``      every judged case within the bound
``fail``      a case outside it (or a fault: an input written, a wrong shape,
              dtype or device, a result reused, a crash); the smallest failing
              case, how to replay it, and whether the official case passed
              ("right at the benchmark's shape, wrong as an operator")
``abstain``   the reference calls an ATen op without a rule (named)
``refused``   the problem cannot be judged: its files do not load, or no size
              of it fits the oracle

On a GPU the oracle evaluates where the candidate runs, in CuPy on that device
where CuPy works, else in torch's namespace (:func:`~numoracle.oracle.xp.on_gpu`;
the tensors shared through DLPack): inputs, parameters, intermediate
values and their radii in float64 in the device's memory, nothing large moved
through the host. An official instance whose float64 floor is above
``max_bytes`` (on the host 256 MiB; on a GPU its free memory over
:data:`DEVICE_MEMORY_PER_BYTE`), or whose evaluation runs out of device memory,
is run whole by the candidate and judged whole in pieces of its rows
(:mod:`.pieces`; beyond :data:`~.pieces.MAX_PIECES` of them, on a sample of its
rows) where the model's rows are independent (:mod:`.sampling`), else at reduced
sizes (said in the notes).

Train mode is kept, as KernelBench keeps it (BatchNorm normalises with batch
statistics); live dropout is switched off by its init argument (``p = 0``,
said in the judgement). A problem whose reference lies within the bound of
zero at the official inputs (identically zero, or far below the bound) is
flagged *degenerate*: there a zeros kernel passes, so only drawn cases can
fail a candidate.
"""

from __future__ import annotations

import ast
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..checking.ratios import part, rows
from ..checking.verdict import COMPARE_PIECE, OutputVerdict, compare
from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model
from ..oracle.traced.capture import Reference, capture, decomposition_table, output_names
from ..oracle.traced.interpret import evaluate
from ..oracle.traced.rules import RULES, NoRule, RuleContext
from ..oracle.tracked import Tracked, moved
from ..oracle.xp import (
    as_namespace,
    is_torch,
    namespace_named,
    on_gpu,
    release_cached_memory,
)
from .cases import (
    FAMILIES,
    PARAMS,
    KBCase,
    case_inputs,
    case_state,
    case_tensors,
    float64_bytes,
    host_arrays,
    layouts_for,
    reduced_sizes,
    valid_sizes,
    varied_knobs,
)
from .census import problem_ops
from .draws import DRAWS_VARIABLE, description, fingerprints, mismatch, regenerates
from .problem import BadFile, Problem, load_problem
from .reference import DTYPES, compute_ops, kernelbench_rule, torch_reference
from .pieces import MAX_PIECES, merged, piece_rows
from .sampling import RowPlan, row_plan, sample_rows
from .sandbox import InProcess, Sandbox, warm

__all__ = ["judge", "Judgement", "CaseResult", "PRECISIONS", "DEFAULT_MAX_BYTES",
           "defines_backward", "DEVICE_MEMORY_PER_BYTE", "whole_bytes",
           "oracle_device", "draws_on", "DRAWS_VARIABLE",
           "PASS_OFFICIAL", "NOT_JUDGED",
           "check_candidate_file", "missing_rules"]

#: the claims a candidate may make, by name: the storage dtype its inputs get is the
#: model's storage format, TF32 is allowed where its compute format is tf32. Eager
#: torch's ``F.linear`` in bf16 may round the product to bf16 before it adds the bias
#: (an unfused epilogue); ``triton``/``cuda-fast``: fp32 under those elementwise
#: accuracy profiles
PRECISIONS: dict[str, PrecisionModel] = {
    "fp32": get_model("fp32"), "tf32": get_model("tf32"),
    "bf16": get_model("bf16", bias_after_store=True),
    "triton": get_model("triton"), "cuda-fast": get_model("cuda-fast"),
}
#: what a judgement on the CPU says of the claim it makes
CPU_ACCURACY_NOTE = ("a CPU candidate: claims torch's CPU elementwise accuracy (torch-cpu: "
                     "GELU's erf by a polynomial with an absolute error of 8 ulp(1), as "
                     "ATen's vectorised kernels evaluate it)")


def cpu_claim(model: PrecisionModel, device: str) -> PrecisionModel:
    """The claim a candidate running on ``device`` is judged under: on the CPU, a
    model of correctly rounded maths (``ieee``) under torch's CPU elementwise accuracy
    (``torch-cpu``, :mod:`numoracle.oracle.accuracy`), what torch's kernels there
    compute; elsewhere ``model`` as it is."""
    if device != "cpu" or model.accuracy != "ieee":
        return model
    return get_model(model, accuracy="torch-cpu")


#: the float64 floor (inputs, parameters, intermediates) above which a size is not
#: evaluated whole on the host
DEFAULT_MAX_BYTES = 256 << 20
#: device bytes the judgement of one float64 floor byte may take on a GPU: the
#: oracle's radii beside every value and intermediate, its temporaries, and the
#: candidate's and torch's own copies in the storage format
DEVICE_MEMORY_PER_BYTE = 6
#: the verdict of a candidate right wherever it runs that refuses some drawn cases
PASS_OFFICIAL = "pass (official inputs only)"
#: the verdict where the machine, not the candidate, stops the judgement (exit 3)
NOT_JUDGED = "not judged"
#: which gradients of a candidate are judged on the sampled official instance
_SAMPLED_BACKWARD = ("on the sampled official instance the gradients of the sampled inputs "
                     "are judged on the sampled rows; a parameter's gradient sums over every "
                     "row, which a sample of rows does not determine: not judged there")
#: which gradients of a candidate are judged on an official instance judged in pieces
_PIECES_BACKWARD = ("on the official instance judged in pieces the gradients of the inputs "
                    "whose rows the pieces are are judged, every row; a parameter's gradient "
                    "sums over every row, not over one piece: not judged there")
#: the note of a judgement some of whose drawn cases the device had no memory for
_NO_MEMORY = "drawn cases the device had no memory for are not judged"


@dataclass
class CaseResult:
    """The judgement of one case."""

    case: KBCase
    passed: bool
    fault: str | None = None
    outputs: list[OutputVerdict] = field(default_factory=list)
    kernelbench: dict[str, bool] = field(default_factory=dict)
    degenerate: bool = False
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: the device ran out of memory: the case is not judged (not the candidate's fault)
    out_of_memory: bool = False
    #: it was the oracle's evaluation in float64 that ran out (the candidate ran)
    oracle_out_of_memory: bool = False
    #: torch's own Model raised on the case: it counts neither for nor against
    rejected: bool = False
    #: the candidate raised an exception (a refusal where the case is not the official one)
    raised: bool = False
    #: what stops the candidate from being judged at all (a missing package): not its fault
    not_judged: str | None = None
    #: whether the candidate's gradients were judged on this case
    backward: bool = False
    #: the ATen ops of the candidate's first call, and of torch's reference
    ops: list[str] = field(default_factory=list)
    reference_ops: list[str] = field(default_factory=list)
    #: the CUDA kernels the candidate's first call launched, with their counts (on a GPU)
    kernels: dict[str, int] = field(default_factory=dict)

    @property
    def worst_ratio(self) -> float:
        if self.fault is not None:
            return float("inf")
        return max((o.worst_ratio for o in self.outputs), default=0.0)

    def reason(self) -> str:
        if self.fault is not None:
            return self.fault
        bad = [o for o in self.outputs if not o.passed]
        if not bad:
            return f"within the bound (worst ratio {self.worst_ratio:.3g})"
        o = bad[0]
        w = o.worst[0] if o.worst else None
        where = (f"; worst at {w.index}: exact {w.reference:.9g}, got {w.got:.9g}, bound "
                 f"{w.bound:.3g}" if w is not None else "")
        text = o.nonfinite or f"{o.mismatched} of {o.count} elements outside the bound"
        label = o.name if o.name.startswith("grad ") else f"output {o.name}"
        return f"{label}: {text} (worst ratio {o.worst_ratio:.3g}){where}"


@dataclass
class Judgement:
    """The verdict on one candidate for one problem (see the module docstring)."""

    problem: str
    candidate: str
    precision: str
    status: str = "pass"
    reason: str = ""
    official: CaseResult | None = None
    failing: CaseResult | None = None
    cases: int = 0
    kernelbench: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    degenerate: bool = False
    seconds: float = 0.0
    worst_ratio: float = 0.0
    #: drawn cases torch's own Model rejects (dropped) and cases the candidate refused
    dropped: int = 0
    refusals: int = 0
    #: the ATen ops the candidate's forward dispatched on the official case
    ops: list[str] = field(default_factory=list)
    #: the CUDA kernels its forward launched on the official case, with their counts
    kernels: dict[str, int] = field(default_factory=dict)
    #: whether it dispatches every computing op of torch's reference (a wrapper)
    wrapper: bool = False
    #: whether its gradients were judged too
    backward: bool = False
    #: seconds per phase, summed over its cases: loading the problem, planning (sizes,
    #: rules), torch reference, candidate start, candidate runs, kernelbench rule
    #: (KernelBench's allclose), capture, oracle, comparison, gradients, closing; ``candidate start: ...`` the candidate's process's
    #: own start by phase (imports, device set-up, loading the candidate, ...)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """``pass``, or ``pass (official inputs only)``: no wrong answer anywhere."""
        return self.status in ("pass", PASS_OFFICIAL)

    def replay(self) -> str:
        """The command that judges the smallest failing case again."""
        if self.failing is None:
            return ""
        return (f"numoracle kernelbench {shlex.quote(self.problem)} "
                f"{shlex.quote(self.candidate)} --precision {self.precision} "
                f"--case {shlex.quote(self.failing.case.to_json())}")

    def as_dict(self) -> dict[str, Any]:
        d = {"problem": self.problem, "candidate": self.candidate, "precision": self.precision,
             "status": self.status, "reason": self.reason, "cases": self.cases,
             "kernelbench": self.kernelbench, "notes": self.notes, "missing": self.missing,
             "degenerate": self.degenerate, "seconds": round(self.seconds, 3),
             "worst_ratio": self.worst_ratio, "dropped": self.dropped,
             "refusals": self.refusals, "ops": self.ops, "kernels": self.kernels,
             "wrapper": self.wrapper,
             "backward": self.backward,
             "timings": {k: round(v, 3) for k, v in self.timings.items()}}
        if self.failing is not None:
            d["failing_case"] = self.failing.case.describe()
            d["failing_official"] = self.failing is self.official
            d["replay"] = self.replay()
        if self.official is not None:
            d["official_passed"] = self.official.passed
        return d


class _Context:
    """What every case of one judgement shares."""

    def __init__(self, problem: Problem, candidate: Path, precision: str, device: str,
                 timeout: float, max_bytes: int, isolated: bool = True,
                 backward: bool = False) -> None:
        if precision not in PRECISIONS:
            raise InvalidArgument(f"precision={precision!r} is unknown; use one of "
                                  f"{tuple(PRECISIONS)}")
        self.problem, self.candidate, self.precision = problem, candidate, precision
        self.model = cpu_claim(PRECISIONS[precision], device)
        self.dtype = self.model.storage.torch_dtype()
        self.dtype_name, self.tf32 = self.model.storage.torch, self.model.compute.name == "tf32"
        self.device, self.timeout, self.max_bytes = device, timeout, max_bytes
        self.isolated = isolated
        self.base: dict[str, Any] = dict(problem.dropout_off())
        self.specs = problem.input_specs(self.base)
        self.choices = layouts_for(self.specs)
        #: how an official instance too large for float64 is sampled (None: it is not)
        self.plan: RowPlan | None = None
        self._worker: Sandbox | InProcess | None = None
        #: whether gradients are judged too (the candidate's against the traced vjp)
        self.backward = backward
        #: an official instance the oracle runs out of memory on is judged smaller
        self.fall_back = True
        #: the GPU the oracle evaluates on (:func:`~numoracle.oracle.xp.on_gpu`); None: the host
        self.gpu = oracle_device(device)
        #: whose generator draws the inputs: the host's, or the GPU's (:func:`draws_on`)
        self.draws = draws_on(device)
        #: whether the candidate's process draws them again itself (:mod:`.draws`)
        self.regenerate = regenerates(os.environ)
        #: whether the judge makes the inputs on the host and hands them over (not
        #: where both it and the candidate's process draw them on the device)
        self.host_inputs = not (self.regenerate and self.draws != "cpu")
        #: seconds per phase (:attr:`Judgement.timings`), summed over the cases
        self.timings: dict[str, float] = {}
        if isolated and os.environ.get("NUMORACLE_KERNELBENCH_TEMPLATE", "1") != "0":
            warm()  # the candidates' template imports while the judge plans

    def lap(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` to ``phase``; the time now."""
        now = time.perf_counter()
        self.timings[phase] = self.timings.get(phase, 0.0) + now - since
        return now

    def run(self, case: KBCase) -> CaseResult:
        t0 = time.perf_counter()
        p, sizes = self.problem, case.overrides(self.base)
        layouts = case.layouts or tuple("C" for _ in self.specs)
        result = CaseResult(case, passed=False)
        drawn: dict[str, list[Any]] = {}
        with p.at(sizes):
            init = p.init_args(sizes)
            first, second = (self._draw(case, d, drawn) for d in ("first", "second"))
            state = case_state(p, case, self.base, dtype=self.dtype)
            ref = torch_reference(p, init=init, state=state, args=second, layouts=layouts,
                                  device=self.device, dtype=self.dtype_name, tf32=self.tf32,
                                  seed=case.seed, rows=case.rows,
                                  on_device=self.gpu is not None)
        # the inputs the oracle takes: the host arrays sent, or drawn again where they
        # were drawn (not held, on the device, while the candidate runs)
        kept = None if self.regenerate else second
        elements = sum(int(np.prod(np.shape(a))) for a in second
                       if isinstance(a, (np.ndarray, torch.Tensor)))
        del second
        self.release()  # torch's cached blocks of its reference: the candidate's to use
        mark = self.lap("torch reference", t0)
        result.reference_ops = ref.ops
        if ref.fault is not None:  # not judged: torch itself cannot run this case
            result.fault, result.seconds = ref.fault, time.perf_counter() - t0
            result.out_of_memory, result.rejected = ref.out_of_memory, not ref.out_of_memory
            return result
        cots = _cotangents(ref.specs, case.seed, self.dtype) if self.backward else None
        # on sampled rows: the gradients of the inputs whose rows are sampled, those rows
        grad_rows = {"rows": list(case.rows), "inputs": list(self.plan.inputs)} \
            if cots is not None and case.rows and self.plan is not None else None
        request = {"init": init, "state": state, **({"draws": description(
                       p, case, self.base, dtype=self.dtype_name, device=self.draws)}
                       if self.regenerate else {"first": first, "second": kept}),
                   "layouts": list(layouts), "device": self.device, "dtype": self.dtype_name,
                   "tf32": self.tf32, "seed": case.seed, "calls": 2, "rows": list(case.rows),
                   "outputs": ref.specs, "input_aliases": ref.input_aliases,
                   "output_aliases": ref.output_aliases, "names": list(p.input_names),
                   "backward": cots, "grad_rows": grad_rows}
        capacity = _capacity(ref.specs, case.rows)
        if cots is not None:
            capacity = 4 * capacity + 16 * (elements + sum(np.size(v)
                                                           for v in state.values()))
        worker = self.worker()
        starting = getattr(worker, "started_in", 0.0)
        answer = worker.run(request, capacity)
        started = getattr(worker, "started_in", 0.0) - starting
        self.timings["candidate start"] = self.timings.get("candidate start", 0.0) + started
        mark = self.lap("candidate runs", mark + started)
        result.notes = list(answer.get("notes", []))
        result.ops = list(answer.get("ops", []))
        result.kernels = dict(answer.get("kernels", {}))
        result.fault = answer.get("fault")
        kind = answer.get("fault_kind")
        if self.regenerate and ("drawn" in answer or "outputs" in answer):
            wrong = mismatch(drawn, answer.get("drawn"), p.input_names)
            if wrong is not None:  # not the inputs the oracle judges: no verdict on them
                answer.pop("outputs", None)
                result.fault, kind = wrong, "judge"
        result.out_of_memory = kind == "oom"
        result.raised = kind == "raise"
        if kind in ("missing", "judge"):  # the machine or the judge, not the candidate
            result.not_judged = result.fault
        if "outputs" in answer:
            rules = [kernelbench_rule(g, r, self.gpu) for g, r in
                     zip(answer["outputs"], ref.outputs, strict=True)]
            mark = self.lap("kernelbench rule", mark)
            result.kernelbench = {t: all(d[t] for d in rules) for t in ("0.01", "0.0001")}
        else:
            result.kernelbench = {"0.01": False, "0.0001": False}
        ref.outputs.clear()  # torch's outputs (on a GPU, there): not needed past the rule
        if result.out_of_memory or result.not_judged:  # the oracle's work would be wasted
            result.seconds = time.perf_counter() - t0
            return result
        if (case.rows or case.span) and self.plan is None:
            raise InvalidArgument(f"case {case.to_json()} names rows, but this problem's "
                                  "rows are not independent (not row-separable)")
        if case.span:
            return self._in_pieces(result, case, sizes, state, kept, cots, answer, t0)
        short = ""
        try:
            if case.rows:  # a sampled instance: the oracle on the same rows of the inputs
                refs = self.reference(self.plan.sizes(sizes, case.rows), state,
                                      self.plan.take(self._second(case, kept), case.rows))
            else:
                refs = self.reference(sizes, state, self._second(case, kept))
        except (torch.OutOfMemoryError, MemoryError) as exc:  # the oracle's (CuPy's is a
            # MemoryError), not the candidate's: not judged
            short = f"the oracle ran out of device memory in float64 ({_first_line(exc)})"
        if short:  # out of the handler: its traceback's arrays are gone when released
            return self._ran_out(result, short, t0)
        refs = [_judged_where(r) for r in refs]
        mark = time.perf_counter()
        if result.fault is None:
            got = answer["outputs"]
            try:
                result.outputs = [self._compare(i, g, r) for i, (g, r) in
                                  enumerate(zip(got, refs, strict=True))]
            except (torch.OutOfMemoryError, MemoryError) as exc:  # as the oracle's
                short = (f"the comparison ran out of device memory in float64 "
                         f"({_first_line(exc)})")
            if short:
                del refs
                return self._ran_out(result, short, t0)
            result.passed = all(o.passed for o in result.outputs)
            mark = self.lap("comparison", mark)
            if result.passed and cots is not None:
                with p.at(sizes):
                    if case.rows and self.plan is not None:
                        idx = np.asarray(case.rows, dtype=np.int64)
                        self.gradients(result, self.plan.sizes(sizes, case.rows), state,
                                       self.plan.take(self._second(case, kept), case.rows),
                                       [c[idx] for c in cots], answer)
                    else:
                        self.gradients(result, sizes, state, self._second(case, kept), cots,
                                       answer)
                mark = self.lap("gradients", mark)
        result.degenerate = all(_within_bound_of_zero(r) for r in refs)
        result.seconds = time.perf_counter() - t0
        return result

    def _draw(self, case: KBCase, which: str, fingerprinted: dict[str, list[Any]] | None
              ) -> list[Any]:
        """The ``which`` (``first``, ``second``) draw of ``case``'s inputs as host arrays.
        Where the candidate's process draws them again: tensors where they were drawn,
        their fingerprints in ``fingerprinted[which]`` (unless None), and nothing of
        the first draw (only the candidate's first call sees it)."""
        draw = 1 if which == "first" else 2
        if not self.regenerate:
            return case_inputs(self.problem, case, self.base, draw=draw, dtype=self.dtype,
                               device=self.draws)
        made = case_tensors(self.problem, case, self.base, draw=draw, dtype=self.dtype,
                            device=self.draws)
        if fingerprinted is not None:
            fingerprinted[which] = fingerprints(made)
        return made if which == "second" else []

    def _second(self, case: KBCase, kept: list[Any] | None) -> list[Any]:
        """The second draw for the oracle: ``kept`` (host arrays), or drawn again."""
        return kept if kept is not None else self._draw(case, "second", None)

    def _ran_out(self, result: CaseResult, fault: str, t0: float) -> CaseResult:
        """``result`` not judged: the oracle, or the comparison with its float64 arrays,
        ran out of device memory (``fault`` says which), not the candidate."""
        result.fault = fault
        result.out_of_memory = result.oracle_out_of_memory = True
        result.passed = False
        result.outputs = []
        self.release()
        result.seconds = time.perf_counter() - t0
        return result

    def worker(self) -> Sandbox | InProcess:
        """The candidate's process (started on first use)."""
        if self._worker is None:
            self._worker = Sandbox(self.candidate, self.device, self.timeout,
                                   readable=[self.problem.path]) \
                if self.isolated else InProcess(self.candidate, self.device)
        return self._worker

    def close(self) -> float:
        """End the candidate's process; when this began (``time.perf_counter()``)."""
        began = time.perf_counter()
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        return began

    def release(self) -> None:
        """Give the cached device memory of torch's allocator and CuPy's pool back to
        the device: between phases (torch's reference, the capture, the oracle) and
        after a case that ran out, so that what this process holds is what it uses
        (torch's blocks are no use to CuPy's pool, nor either to the candidate's
        process)."""
        if self.gpu is not None:
            torch.cuda.empty_cache()
            release_cached_memory(0)

    def synchronize(self) -> None:
        """Wait for the work queued on the oracle's GPU (none on the host)."""
        if self.gpu is not None and self.gpu.type == "cuda":
            torch.cuda.synchronize(self.gpu)

    def _placed(self, a: Any) -> Any:
        """A host array (or tensor) as the oracle's capture takes it: on the host, or
        a float64 (integer: own dtype) tensor on the oracle's GPU."""
        if self.gpu is None or not isinstance(a, (np.ndarray, torch.Tensor)):
            return a
        t = torch.as_tensor(a).to(self.gpu)
        return t.double() if t.is_floating_point() else t

    def reference(self, sizes: Mapping[str, Any], state: Mapping[str, np.ndarray],
                  args: Sequence[Any], cotangents: Sequence[np.ndarray] | None = None
                  ) -> Any:
        """The exact outputs and bounds of ``Model.forward`` on ``args``; with
        ``cotangents`` (one per output), (outputs, {gradient label: exact gradient})
        for every floating input (``input:k``) and parameter (``param:name``)."""
        model = self.problem.model(sizes)
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()},
                              strict=True)
        _batch_statistics_only(model)
        if self.gpu is not None:
            model = model.to(self.gpu)
        names = self.problem.input_names
        labels: dict[str, str] = {}
        if cotangents is not None:
            labels = {n: f"input:{k}" for k, (n, a) in enumerate(zip(names, args,
                                                                      strict=False))
                      if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                      or isinstance(a, torch.Tensor) and a.is_floating_point()}
            labels.update({i: f"param:{p}" for i, p in Reference(model, names).state.items()})
        ref = Reference(model, names, grads=tuple(labels))
        tensors: dict[str, Any] = {n: self._placed(a) for n, a in zip(names, args,
                                                                      strict=False)}
        del args  # the caller's draw, where it passes one, freed once placed
        params = dict(model.named_parameters())
        for input_name, pname in ref.state.items():
            tensors[input_name] = self._placed(params[pname].detach().to(torch.float64))
        if self.gpu is None:  # host arrays (of a bfloat16 input: its values in float32)
            tensors = dict(zip(tensors, host_arrays(list(tensors.values())), strict=True))
        if self.gpu is None:
            rules = RuleContext(self.model)
        else:  # CuPy on that GPU where it works (the tensors shared through DLPack), else torch
            xp, where = on_gpu(self.gpu.index) if self.gpu.type == "cuda" else \
                (namespace_named("torch"), self.gpu)
            rules = RuleContext(self.model, xp=xp, device=where)
        if cotangents is None:
            mark = time.perf_counter()
            graph = capture(ref, tensors)
            self.release()  # the capture's float64 forward in torch's cached blocks
            mark = self.lap("capture", mark)
            # handed over: an input's memory freed after the last node that reads it
            out = evaluate(graph, tensors, rules, consume=True)
            self.synchronize()  # the oracle's queued device work on its own clock
            self.lap("oracle", mark)
            return [out[n] for n in graph.outputs]
        outs = output_names(ref.call({k: torch.as_tensor(v).double()
                                      if isinstance(v, (np.ndarray, torch.Tensor))
                                      and torch.as_tensor(v).is_floating_point()
                                      else torch.as_tensor(v) for k, v in tensors.items()}))
        cots = {f"grad_{n}": self._placed(np.asarray(c, dtype=np.float64))
                for n, c in zip(outs, cotangents, strict=True)}
        mark = time.perf_counter()
        graph = capture(ref, tensors, cots)
        self.release()
        mark = self.lap("capture", mark)
        out = evaluate(graph, {**tensors, **cots}, rules)
        self.synchronize()
        self.lap("oracle", mark)
        return ([out[n] for n in outs],
                {label: out[f"grad_{name}"] for name, label in labels.items()})

    def gradients(self, result: CaseResult, sizes: Mapping[str, Any],
                 state: Mapping[str, np.ndarray], args: Sequence[Any],
                 cotangents: Sequence[np.ndarray], answer: Mapping[str, Any]) -> None:
        """Judge the candidate's gradients in ``answer`` against the traced vjp."""
        if "backward_note" in answer:
            result.notes.append(answer["backward_note"])
            return
        result.outputs.extend(self._gradient_verdicts(sizes, state, args, cotangents, answer))
        result.passed = all(o.passed for o in result.outputs)
        result.backward = True

    def _gradient_verdicts(self, sizes: Mapping[str, Any], state: Mapping[str, np.ndarray],
                           args: Sequence[Any], cotangents: Sequence[np.ndarray],
                           answer: Mapping[str, Any], piece: tuple[int, int] | None = None
                           ) -> list[OutputVerdict]:
        """The candidate's gradients in ``answer`` against the traced vjp; on a
        ``piece`` of rows ``[i0, i1)`` (``args`` and ``cotangents`` those rows) only the
        gradients of the inputs whose rows they are, those rows of them."""
        _, exact = self.reference(sizes, state, args, cotangents)
        names = self.problem.input_names
        verdicts = []
        for label in answer["backward_pieces"]:
            if label not in exact:
                continue
            got = answer["gradients"][label]
            kind, _, what = label.partition(":")
            if piece is not None:
                if kind != "input" or self.plan is None or int(what) not in self.plan.inputs:
                    continue
                got = got[piece[0]:piece[1]]
            verdict = self._compare(0, got, exact[label])
            verdict.name = f"grad {names[int(what)] if kind == 'input' else what}"
            verdicts.append(verdict)
        return verdicts

    def _in_pieces(self, result: CaseResult, case: KBCase, sizes: Mapping[str, Any],
                   state: Mapping[str, np.ndarray], kept: list[Any] | None,
                   cotangents: Sequence[np.ndarray] | None, answer: Mapping[str, Any],
                   t0: float) -> CaseResult:
        """Judge the candidate's whole outputs in ``answer`` a piece of rows at a time
        (:mod:`.pieces`): the oracle on rows ``[i0, i1)`` of the inputs, compared with
        the same rows of each output (and, with ``cotangents``, of the row inputs'
        gradients, up to the first failing piece); a piece the oracle runs out of
        device memory on is halved and tried again. On a failure the case becomes the first failing piece (its
        repro replays that piece alone)."""
        assert self.plan is not None
        if result.fault is not None:  # no outputs to judge
            result.seconds = time.perf_counter() - t0
            return result
        first, stop, per = case.span
        args = self._second(case, kept)
        got = answer["outputs"]
        backward = cotangents is not None and "backward_note" not in answer
        if cotangents is not None and not backward:
            result.notes.append(answer["backward_note"])
        found: dict[str, list[tuple[int, OutputVerdict]]] = {}
        failing: tuple[int, int] | None = None
        degenerate, halved, count, i0 = True, False, 0, first
        while i0 < stop:
            i1 = min(i0 + per, stop)
            rows = range(i0, i1)
            short, refs = "", []
            try:
                refs = [_judged_where(r) for r in self.reference(
                    self.plan.sizes(sizes, rows), state, self.plan.take(args, rows))]
                mark = time.perf_counter()
                verdicts = [self._compare(k, g[i0:i1], r)
                            for k, (g, r) in enumerate(zip(got, refs, strict=True))]
                self.lap("comparison", mark)
                degenerate = degenerate and all(_within_bound_of_zero(r) for r in refs)
                del refs
                if backward and failing is None and all(v.passed for v in verdicts):
                    with self.problem.at(sizes):
                        verdicts += self._gradient_verdicts(
                            self.plan.sizes(sizes, rows), state,
                            self.plan.take(args, rows), [c[i0:i1] for c in cotangents or ()],
                            answer, (i0, i1))
            except (torch.OutOfMemoryError, MemoryError) as exc:  # the oracle's
                short = (f"the oracle ran out of device memory in float64 on rows {i0} "
                         f"to {i1 - 1} ({_first_line(exc)})")
            if short and per > 1:  # out of the handler: a smaller piece, again
                refs = []
                self.release()
                per, halved = (per + 1) // 2, True
                continue
            if short:
                return self._ran_out(result, short, t0)
            for v in verdicts:
                found.setdefault(v.name, []).append((i0, v))
            if failing is None and not all(v.passed for v in verdicts):
                failing = (i0, i1)
            count, i0 = count + 1, i1
        result.outputs = [merged(parts) for parts in found.values()]
        result.passed = all(o.passed for o in result.outputs)
        result.backward = backward and result.passed
        result.degenerate = degenerate
        result.notes.append(f"judged whole, in {count} piece{'s' if count > 1 else ''} of "
                            f"{case.span[2]} rows ({self.plan.knob}; rows {first} to "
                            f"{stop - 1})" + (f", halved to {per} where the oracle ran out of "
                                              "device memory" if halved else ""))
        if failing is not None:
            result.case = replace(case, span=(failing[0], failing[1], failing[1] - failing[0]))
        result.seconds = time.perf_counter() - t0
        return result

    def _compare(self, i: int, got: np.ndarray, ref: Any) -> OutputVerdict:
        name = f"out{i}"
        ref = _judged_where(ref)
        if isinstance(ref, Tracked):  # moved where the reference is in its own dtype,
            # made float64 there (no float64 copy on the host)
            return compare(name, as_namespace(got, ref.xp), ref,
                           probabilistic=self.model.probabilistic)
        same = np.array_equal(np.asarray(got), np.asarray(ref))
        ratio = 0.0 if same else float("inf")
        return OutputVerdict(name=name, shape=tuple(np.shape(got)), n=0, passed=same,
                             mismatched=0 if same else int(np.sum(np.asarray(got) != ref)),
                             worst_ratio=ratio, median_ratio=ratio, worst_ratio_det=ratio,
                             worst_ratio_prob=ratio, median_ratio_det=ratio,
                             median_ratio_prob=ratio, exact=True)


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's text, at most 160 characters."""
    return (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)[:160]


def _cotangents(specs: Sequence[Any], seed: int, dtype: torch.dtype
                ) -> list[np.ndarray] | None:
    """One cotangent per output, uniform in [-1, 1) and exact in ``dtype`` (None where an
    output is not floating: no vjp)."""
    if not all(spec[1] in DTYPES for spec in specs):
        return None
    rng = np.random.default_rng(seed + 0x5EED)
    out = []
    for shape, _, _ in specs:
        c = torch.from_numpy(rng.uniform(-1.0, 1.0, shape).astype(np.float32)).to(dtype)
        out.append((c.float() if dtype != torch.float32 else c).numpy())
    return out


def _capacity(specs: Sequence[Any], rows: Sequence[int]) -> int:
    """Bytes of the shared buffer the outputs of one case come back in: twice each
    output's elements (a strided output spans more than its elements), or its rows."""
    total = 0
    for shape, dtype, _ in specs:
        n = int(np.prod(shape)) * DTYPES[dtype].itemsize if dtype in DTYPES else \
            int(np.prod(shape)) * 8
        if rows and shape:
            n = n // max(shape[0], 1) * len(rows)
        total += 2 * n + 64
    return total


def _batch_statistics_only(model: torch.nn.Module) -> None:
    """Stop train-mode norms from updating their running statistics: in train mode
    their output uses the batch's statistics only, so the result is the same, and
    the graph holds no in-place update of a buffer."""
    for m in model.modules():
        if m.training and getattr(m, "track_running_stats", False):
            setattr(m, "track_running_stats", False)  # noqa: B010 - a Module attribute to mypy
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                setattr(m, name, None)


def _judged_where(ref: Any) -> Any:
    """A reference in torch's namespace where it is compared: on its GPU in CuPy's
    (shared through DLPack, no copy), on the host without CuPy or off a GPU."""
    if not isinstance(ref, Tracked) or not is_torch(ref.xp):
        return ref
    if ref.xp.tensor(ref.value).device.type == "cuda":
        try:
            import cupy  # noqa: PLC0415 - optional, only where a GPU reference is compared
        except ImportError:
            return ref.to_host()
        return moved(ref, cupy)
    return ref.to_host()


def _within_bound_of_zero(ref: Any) -> bool:
    """Whether zeros would pass: every exact value within its own bound of 0
    (computed where the reference lives)."""
    if not isinstance(ref, Tracked):
        return not np.any(ref)
    xp, value = ref.xp, ref.value
    shape = tuple(value.shape)
    if not shape:
        return bool(xp.all(xp.abs(value) < ref.bound(False))) or not bool(xp.any(value))
    # a piece of whole rows at a time (a large output's bound is not made whole)
    return all(bool(xp.all(xp.abs(part(value, shape, i0, i1)) < part(ref.det, shape, i0, i1)
                           + part(ref.ref_err, shape, i0, i1)))
               for i0, i1 in rows(shape, COMPARE_PIECE)) or not bool(xp.any(value))


def missing_rules(problem: Problem, sizes: Mapping[str, Any]) -> list[str]:
    """ATen ops of the reference's graph at ``sizes`` that have no rule."""
    ops = problem_ops(problem, sizes=sizes, table=decomposition_table()).ops
    return [op for op in ops if op not in RULES]


def _strategy(ctx: _Context, small: Mapping[str, int]) -> Any:
    """Drawn cases: each varied knob from 1 to twice its official value (a kernel
    written for the benchmark's shape only fails above it too), or to four times
    its reduced value where the official instance does not fit; every value
    family, layout and parameter choice; a seed."""
    from hypothesis import strategies as st  # noqa: PLC0415 - hypothesis only when judging

    knobs = varied_knobs(ctx.problem)
    fits = float64_bytes(ctx.problem, ctx.base) <= ctx.max_bytes

    @st.composite
    def cases(draw: Any) -> KBCase:
        sizes = {}
        for name, value in sorted(knobs.items()):
            hi = 2 * value if fits else min(value, max(4 * small.get(name, value), 16))
            sizes[name] = draw(st.integers(1, hi))
        layouts = tuple(draw(st.sampled_from(c)) for c in ctx.choices)
        return KBCase(sizes=tuple(sorted(sizes.items())), family=draw(st.sampled_from(FAMILIES)),
                      layouts=layouts, params=draw(st.sampled_from(PARAMS)),
                      seed=draw(st.integers(0, 2 ** 16)))
    return cases()


@dataclass
class _Tally:
    """What the drawn cases of one judgement came to, beside the verdicts."""

    judged: int = 0
    failure: CaseResult | None = None
    #: cases torch's own Model rejects (dropped), and the first one's sentence
    dropped: int = 0
    dropped_first: str = ""
    #: cases the candidate refused with an exception, and the first one's
    refused: int = 0
    refused_first: str = ""
    notes: list[str] = field(default_factory=list)
    #: a case the judge could not judge (the candidate's inputs not the judge's): the
    #: judgement stops, not judged
    stopped: CaseResult | None = None


def _drawn(ctx: _Context, small: Mapping[str, int], examples: int, seed: int, shrink: bool,
           progress: Any = None) -> _Tally:
    """Judge up to ``examples`` drawn cases (see :class:`_Tally`)."""
    from hypothesis import HealthCheck, Phase, assume, given, settings  # noqa: PLC0415
    from hypothesis import seed as hseed  # noqa: PLC0415 - hypothesis only when judging

    tally = _Tally()
    failures: list[CaseResult] = []
    phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]

    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=phases)
    @hseed(seed)
    @given(_strategy(ctx, small))
    def check(case: KBCase) -> None:
        assume(tally.stopped is None)
        sizes = case.overrides(ctx.base)
        assume(valid_sizes(ctx.problem, sizes))
        assume(float64_bytes(ctx.problem, sizes) <= ctx.max_bytes)
        result = ctx.run(case)
        if progress is not None:
            progress(1)
        if result.not_judged:  # not the candidate's doing: no verdict, no more cases
            tally.stopped = result
            assume(False)
        if result.out_of_memory:
            if not any(n.startswith(_NO_MEMORY) for n in tally.notes):
                tally.notes.append(f"{_NO_MEMORY} ({case.describe()})")
            assume(False)
        if result.rejected:  # counts neither for nor against the candidate
            tally.dropped += 1
            tally.dropped_first = tally.dropped_first or f"{case.describe()}: {result.fault}"
            assume(False)
        if result.raised:  # a refusal: right or refused, never wrong, is not a failure
            tally.refused += 1
            tally.refused_first = tally.refused_first or f"{case.describe()}: {result.fault}"
            assume(False)
        tally.judged += 1
        if not result.passed:
            failures.append(result)
            raise AssertionError(result.reason())

    try:
        check()
    except AssertionError:
        pass
    except Exception as exc:  # noqa: BLE001 - Hypothesis giving up is reported, not raised
        if not failures:
            tally.notes.append(f"drawn cases stopped: {type(exc).__name__}: {str(exc)[:120]}")
    tally.failure = failures[-1] if failures else None
    return tally


def defines_backward(path: str | Path) -> bool:
    """Whether the candidate file defines a class with a ``backward`` method (an
    autograd Function of its own): then its gradients are judged by default."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return False
    return any(isinstance(n, ast.ClassDef) and any(
        isinstance(m, ast.FunctionDef) and m.name == "backward" for m in n.body)
        for n in ast.walk(tree))


def check_candidate_file(path: str | Path) -> None:
    """Refuse a candidate file that does not parse or defines no ``ModelNew``, without
    running it (running it may compile CUDA: that happens in the worker).

    Raises
    ------
    BadFile
    """
    path = Path(path)
    if not path.is_file():
        raise BadFile(f"candidate file {str(path)!r} does not exist; give the path of a .py "
                      "file or of a folder of them")
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise BadFile(f"candidate file {path.name}: syntax error at line {exc.lineno}: "
                      f"{exc.msg}") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    if "ModelNew" not in names:
        raise BadFile(f"candidate file {path.name} does not define ModelNew; KernelBench's "
                      "format needs a class ModelNew(nn.Module)")


def judge(problem: str | Path, candidate: str | Path, *, precision: str = "fp32",
          examples: int = 20, seed: int = 0, device: str = "cpu", timeout: float = 120.0,
          max_bytes: int | None = None, case: KBCase | None = None,
          isolated: bool = True, shrink: bool = True,
          progress: Callable[[int], None] | None = None,
          backward: bool | None = None, fall_back: bool = True) -> Judgement:
    """Judge the candidate file against the problem file.

    Parameters
    ----------
    problem, candidate : path
        KernelBench-format files (``Model``/``get_inputs``/``get_init_inputs``;
        ``ModelNew``).
    precision : str
        The claim: ``"fp32"`` (TF32 off in the candidate's process), ``"tf32"``,
        ``"bf16"`` (inputs, parameters and outputs in bfloat16).
    examples : int
        Drawn cases after the official one (0: the official case only).
    seed : int
        Hypothesis's seed for the drawn cases.
    device : str
        Where the candidate runs (``"cpu"``, ``"cuda"``).
    timeout : float
        Seconds one case may take in the candidate's process.
    max_bytes : int or None
        The float64 floor above which a size is not evaluated whole; an
        official instance above it is judged on sampled rows or at reduced
        sizes (said in the judgement). None: :func:`whole_bytes` of ``device``.
    case : KBCase or None
        Judge this case only (the replay of a failure).
    isolated : bool
        Run the candidate in a hardened process of its own (:mod:`.sandbox`);
        False runs it here (for debugging a candidate: nothing then keeps it
        from changing the judge).
    shrink : bool
        Shrink a failing drawn case to the smallest one (False: report the
        first failing case drawn, as a survey of many candidates may prefer).
    progress : callable or None
        Called with 1 after every case run (a progress display's advance).
    backward : bool or None
        Judge the candidate's gradients w.r.t. its inputs and parameters too,
        against the traced vjp of ``Model`` under the same claim, on the same
        cases (cotangents drawn per case); None: when the candidate's file
        defines a ``backward`` (its own autograd Function). A candidate whose
        outputs carry no autograd graph is said so, not failed.
    fall_back : bool
        Where the oracle runs out of device memory on a whole official instance
        that ``max_bytes`` admits: judge it on sampled rows or at reduced sizes
        (True), or stop, ``not judged`` (False: a driver that judges it again
        whole with the device to itself).

    Returns
    -------
    Judgement
    """
    t0 = time.perf_counter()
    out = Judgement(str(problem), str(candidate), precision)
    if max_bytes is None:
        max_bytes = whole_bytes(device)
    try:
        prob = load_problem(problem)
        check_candidate_file(candidate)
        ctx = _Context(prob, Path(candidate), precision, device, timeout, max_bytes,
                       isolated, defines_backward(candidate) if backward is None else backward)
        out.backward = ctx.backward
        ctx.fall_back = fall_back
        ctx.lap("loading the problem", t0)
    except BadFile as exc:
        out.status, out.reason = "refused", str(exc)
        return out
    if device.startswith("cuda") and not torch.cuda.is_available():
        out.status = NOT_JUDGED
        out.reason = f"--device {device}, but this machine has no CUDA device torch can use"
        return out
    if ctx.model is not PRECISIONS[precision]:
        out.notes.append(CPU_ACCURACY_NOTE)
    if ctx.draws != "cpu":
        out.notes.append(f"inputs drawn by torch's generator on {ctx.draws} (seeded as on "
                         f"the host, other values; a replay draws them so with "
                         f"{DRAWS_VARIABLE}=device)")
    if ctx.regenerate:
        out.notes.append(f"the candidate's process drew its inputs itself, by torch's "
                         f"generator on {ctx.draws}, from the judge's seeds; its "
                         f"fingerprints of them are compared with the judge's on every case")
    for k in ctx.base:
        out.notes.append(f"{k}=0: dropout switched off (train mode's masks are random)")
    try:
        return _judge(ctx, out, examples, seed, case, shrink, progress)
    except NoRule as exc:
        out.status, out.reason = "abstain", str(exc)
        return out
    except BadFile as exc:
        out.status, out.reason = "refused", str(exc)
        return out
    finally:
        laps = dict(getattr(ctx._worker, "laps", {}))
        ctx.lap("closing", ctx.close())
        out.timings = {**ctx.timings, **{f"candidate start: {k}": v for k, v in laps.items()}}
        out.seconds = time.perf_counter() - t0


def draws_on(device: str) -> str:
    """Where a judgement whose candidate runs on ``device`` draws its inputs: on the
    host (the CPU's generator: the same values wherever the judge runs), or, for a
    GPU with :data:`DRAWS_VARIABLE` set to ``device``, on that GPU (its generator, the
    same seeds: other values from the same distributions, billions of them in a
    fraction of the seconds, the same again on the same kind of GPU)."""
    if os.environ.get(DRAWS_VARIABLE, "host") == "device" and oracle_device(device) \
            is not None:
        return str(oracle_device(device))
    return "cpu"


def oracle_device(device: str) -> torch.device | None:
    """Where the oracle evaluates a judgement whose candidate runs on ``device``:
    that GPU (CuPy's or torch's namespace there), or None for the host (NumPy)."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    gpu = torch.device(device)
    return gpu if gpu.index is not None else torch.device("cuda", torch.cuda.current_device())


def whole_bytes(device: str) -> int:
    """The float64 floor a judgement on ``device`` evaluates whole: on the host
    :data:`DEFAULT_MAX_BYTES`; on a GPU its free memory over
    :data:`DEVICE_MEMORY_PER_BYTE` (at least the host's)."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return DEFAULT_MAX_BYTES
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return max(DEFAULT_MAX_BYTES, int(free) // DEVICE_MEMORY_PER_BYTE)


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.3g} MiB"


def _official(ctx: _Context, fits: bool, small: Mapping[str, int], seed: int,
              max_bytes: int | None = None) -> KBCase:
    """The benchmark's own instance: whole where it fits, else whole in pieces of
    rows (:mod:`.pieces`) where they are at most :data:`~.pieces.MAX_PIECES`, else on
    a sample of its rows (:mod:`.sampling`), else at reduced sizes. ``max_bytes``:
    the float64 floor of a piece (None: ``ctx.max_bytes``)."""
    if fits:
        return KBCase()
    if ctx.plan is not None:
        per = piece_rows(ctx.problem, ctx.base, ctx.plan, max_bytes or ctx.max_bytes)
        if -(-ctx.plan.total // per) <= MAX_PIECES:
            return KBCase(span=(0, ctx.plan.total, per))
        return KBCase(rows=sample_rows(ctx.plan, seed))
    return KBCase(sizes=tuple(sorted(small.items())))


def _official_note(ctx: _Context, official: KBCase) -> str:
    """What a judgement says of an official instance above ``ctx.max_bytes``."""
    above = f"the official instance needs more than {_mib(ctx.max_bytes)} in float64"
    return f"{above}: {_how_rows(ctx, official)}" if ctx.plan is not None else (
        f"{above} and cannot be judged on its rows (they are not independent, none "
            f"fits, or its inputs are too many to hand over whole): its distribution "
            f"judged at {official.describe()}")


def _how_rows(ctx: _Context, official: KBCase) -> str:
    """How the rows of an official instance the oracle does not hold whole are judged."""
    assert ctx.plan is not None
    if official.span:
        first, stop, per = official.span
        count = -(-(stop - first) // per)
        return (f"the candidate ran on it whole, and every row is judged: whole, in {count} "
                f"piece{'s' if count > 1 else ''} of {per} rows ({ctx.plan.knob})")
    return (f"the candidate ran on it whole, and rows {', '.join(map(str, official.rows))} "
            f"of its {ctx.plan.total} ({ctx.plan.knob}) are judged (more than {MAX_PIECES} "
            f"pieces of rows would judge them all)")


def _smaller(ctx: _Context, out: Judgement, whole: CaseResult, seed: int) -> KBCase:
    """Where the oracle ran out of device memory on the whole official instance:
    the instance whole in pieces of half its floor, else on a sample of its rows
    (within the host's floor), else at reduced sizes; said in the notes."""
    budget = min(ctx.max_bytes, DEFAULT_MAX_BYTES)
    small = reduced_sizes(ctx.problem, ctx.base, most=max(1 << 16, budget // 512)) or {}
    ctx.plan = row_plan(ctx.problem, ctx.base, small, budget,
                        host_inputs=ctx.host_inputs)
    if ctx.plan is not None:  # pieces of half the floor that ran out (halved again there)
        case = _official(ctx, False, small, seed, max(budget, ctx.max_bytes // 2))
        how = _how_rows(ctx, case)
    else:
        case = KBCase(sizes=tuple(sorted(small.items())))
        how = f"its distribution judged at {case.describe()}"
    out.notes.append(f"the whole official instance did not fit the device's memory in "
                     f"float64 ({whole.fault}): {how}")
    return case


def _wrapper_note(first: CaseResult) -> str | None:
    """A note where the candidate dispatches every computing ATen op torch's reference
    does: it calls the very op the problem asks for."""
    theirs = compute_ops(first.reference_ops)
    ours = set(first.ops)
    if theirs and ours and all(op in ours for op in theirs):
        return (f"ModelNew dispatches the reference's own ATen ops ({', '.join(theirs)}): a "
                "wrapper of torch's operator, not a kernel of its own")
    return None


def _judge(ctx: _Context, out: Judgement, examples: int, seed: int,
           case: KBCase | None, shrink: bool, progress: Any = None) -> Judgement:
    prob = ctx.problem
    mark = time.perf_counter()
    small = reduced_sizes(prob, ctx.base, most=max(1 << 16, ctx.max_bytes // 512)) \
        if varied_knobs(prob) else {}
    if small is None:
        out.status, out.reason = "refused", "the model does not run at its official sizes"
        return out
    fits = float64_bytes(prob, ctx.base) <= ctx.max_bytes
    if not fits or case is not None and (case.rows or case.span):
        ctx.plan = row_plan(prob, ctx.base, small, ctx.max_bytes,
                            host_inputs=ctx.host_inputs)
    probe = {} if fits else small
    out.missing = missing_rules(prob, {**ctx.base, **probe})
    ctx.lap("planning", mark)
    if out.missing:
        out.status = "abstain"
        out.reason = "no rule for " + ", ".join(out.missing)
        return out
    if case is not None:
        first = ctx.run(case)
        if progress is not None:
            progress(1)
        if first.out_of_memory or first.not_judged or first.rejected:
            out.status, out.reason = NOT_JUDGED, f"not judged: {first.fault}"
            return out
        out.cases = 1
    else:
        official = _official(ctx, fits, small, seed)
        if not fits:
            out.notes.append(_official_note(ctx, official))
        first = ctx.run(official)
        if progress is not None:
            progress(1)
        if first.oracle_out_of_memory and fits and not ctx.fall_back:
            out.status, out.reason = NOT_JUDGED, f"not judged: {first.fault}"
            return out
        if first.oracle_out_of_memory and fits:
            official = _smaller(ctx, out, first, seed)
            first = ctx.run(official)
        if first.out_of_memory and (official.rows or official.span):
            out.notes.append(f"the official instance did not fit the device's memory "
                             f"({first.fault}): judged at reduced sizes instead")
            official = KBCase(sizes=tuple(sorted(small.items())))
            first = ctx.run(official)
        if first.out_of_memory or first.not_judged or first.rejected:
            out.status, out.reason = NOT_JUDGED, f"not judged: {first.fault}"
            return out
        out.official, out.cases = first, 1
        out.kernelbench = dict(first.kernelbench)
        out.degenerate = first.degenerate
        out.ops = list(first.ops)
        out.kernels = dict(first.kernels)
        wrapper = _wrapper_note(first)
        if wrapper:
            out.wrapper = True
            out.notes.append(wrapper)
        if first.degenerate:
            out.notes.append("degenerate at the official inputs: the reference is within "
                             "the bound of zero there, so a zeros kernel would pass it; "
                             "judged at drawn inputs")
    out.notes.extend(n for n in first.notes if n not in out.notes)
    if ctx.backward and (first.case.rows or first.case.span):
        out.notes.append((_PIECES_BACKWARD if first.case.span else _SAMPLED_BACKWARD) + (
            "; parameters' gradients are judged on the drawn cases, at sizes the oracle "
            "holds whole" if examples > 0 and case is None else
            "; with no drawn case, parameters' gradients are not judged at all"))
    out.worst_ratio = first.worst_ratio
    failing = None if first.passed else first
    tally = _Tally()
    if failing is None and case is None and examples > 0:
        tally = _drawn(ctx, small, examples, seed, shrink, progress)
        failing = tally.failure
        out.cases += tally.judged
        if tally.stopped is not None:
            out.status, out.reason = NOT_JUDGED, f"not judged: {tally.stopped.fault}"
            return out
        out.notes.extend(tally.notes)
        out.dropped, out.refusals = tally.dropped, tally.refused
        if tally.dropped:
            out.notes.append(f"{tally.dropped} drawn case{'s' if tally.dropped > 1 else ''} "
                             f"torch's own Model rejects dropped (counted neither for nor "
                             f"against the candidate); the first: {tally.dropped_first}")
        if out.degenerate and tally.judged == 0:
            out.status, out.reason = "refused", "degenerate at the official inputs and no "\
                "drawn case could be judged"
            return out
    if failing is None and tally.refused:
        out.status = PASS_OFFICIAL
        out.reason = (f"{out.cases} cases within the {ctx.model.name} bound; "
                      f"{tally.refused} drawn case{'s' if tally.refused > 1 else ''} refused "
                      f"with an error (the first: {tally.refused_first})")
        return out
    if failing is None:
        out.status = "pass"
        out.reason = f"{out.cases} cases within the {ctx.model.name} bound" + (
            " (outputs and gradients)" if ctx.backward and out.official is not None
            and out.official.backward else "")
        return out
    out.status, out.failing = "fail", failing
    out.worst_ratio = failing.worst_ratio
    if out.official is not None and out.official.passed and not failing.case.official:
        out.reason = ("right at the benchmark's shape, wrong as an operator: "
                      + failing.reason())
    else:
        out.reason = failing.reason()
    return out
