"""Shrinking a failing case that was not drawn here: arrays dumped from a
training step, the op, its parameters and the precision claimed.

The kernel is re-run on smaller and simpler versions of the case, and a
version is kept when it still fails *for the same reason*: the output that
failed first still fails, with the same class of diagnosis (a logic bug, a
coarser precision, non-finite values, the same kind of kernel error).

The shrinker is a plain greedy delta-debugging loop (Zeller's ddmin over the
indices of each dimension), not Hypothesis's: the case has no choice sequence
to replay, and a ddmin over index sets says directly which batch rows,
channels, features or pixels are kept. Two passes alternate until neither
makes progress:

A failure may get stronger on the way: one a coarser precision explained
(``precision:tf32``) may become one no precision explains (``logic``), since
a smaller case often lies in the exact regime; nothing else changes.

1. **structure**: for each dimension parameter (batch, features, channels,
   height, width, grid size, ...), the arrays are cut to a subset of its
   indices (the same subset on every axis the parameter sizes; axes that only
   follow from it, such as a convolution's output rows, keep their first
   entries); flags are switched off (no bias) and small parameters (kernel
   size, spline order) stepped down towards their smallest value;
2. **values**: each input is tried as zeros, then rounded to 1, 2, 4 or 8
   significant bits (towards the exact grid, where the bound is 0 and a
   logic bug cannot hide behind rounding), then, for small arrays, element
   by element to 0.

Every candidate is one :func:`~numoracle.checking.check.check_case` call with
the given inputs; the result is saved as a normal repro (its inputs stored,
as the seed cannot make them) in the regression store.
"""

from __future__ import annotations

import itertools
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cases.case import Case
from ..errors import InvalidArgument, UnsupportedCase
from ..oracle.formats import get_format, quantize
from ..oracle.ops import get_op
from ..oracle.ops.plan import Choice, Dim, Flag, Multiple, Pair, smallest
from .check import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from ..targets.target import Target
    from .verdict import Verdict

__all__ = ["infer_params", "reason", "shrink", "ShrinkResult", "load_arrays"]

Arrays = dict[str, np.ndarray]
Params = dict[str, Any]


def _numbers(name: str, arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` when it holds real numbers; InvalidArgument naming it otherwise."""
    if arr.dtype.kind not in "fiub" and arr.dtype.name != "bfloat16":
        raise InvalidArgument(f"{where}: {name!r} holds {arr.dtype} values, not real numbers; "
                              f"save it as floats, e.g. np.asarray({name}, dtype=np.float32)")
    return arr


def load_arrays(path: Path | str) -> Arrays:
    """Arrays by name from a ``.npz`` file or a folder of ``.npy`` files.

    Raises
    ------
    InvalidArgument
        When ``path`` is missing, not an archive NumPy can read, or holds
        arrays of Python objects (pickled data, never loaded) or of non-numbers.
    """
    p = Path(path)
    hint = "save the step's inputs with np.savez(path, x=..., weight=...)"
    if p.is_dir():
        files = sorted(p.glob("*.npy"))
        if not files:
            raise InvalidArgument(f"{str(path)!r} holds no .npy files; dump each input as "
                                  "NAME.npy (x.npy, weight.npy, ...) or give an .npz")
        out = {}
        for f in files:
            try:
                arr = np.load(f, allow_pickle=False)
            except ValueError as exc:
                pickled = "allow_pickle" in str(exc)
                raise InvalidArgument(
                    f"{str(f)!r} " + ("holds Python objects (pickled data), which are never "
                                      "loaded" if pickled else f"cannot be read ({exc})")
                    + f"; save it with np.save('{f.name}', np.asarray(arr, dtype=np.float32))"
                ) from None
            except OSError as exc:
                raise InvalidArgument(f"{str(f)!r} is not a readable .npy file ({exc}); "
                                      f"{hint}") from None
            out[f.stem] = _numbers(f.stem, arr, str(f))
        return out
    if not p.exists():
        raise InvalidArgument(f"{str(path)!r} does not exist; give an .npz file or a folder "
                              f"of .npy files ({hint})")
    if p.is_file():
        try:
            z = np.load(p, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise InvalidArgument(f"{str(path)!r} is one array, not a case's inputs by "
                                      f"name; {hint}")
            with z:
                return {k.removeprefix("input_"): _numbers(k, z[k], str(path))
                        for k in z.files if not k.startswith("got_")}
        except InvalidArgument:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            if not zipfile.is_zipfile(p):
                what = "is not an .npz archive (NumPy's zip of .npy files)"
            elif "allow_pickle" in str(exc) or "pickled" in str(exc):
                what = "holds Python objects (pickled data), which are never loaded"
            else:
                what = f"is not an .npz archive NumPy can read ({exc})"
            raise InvalidArgument(f"{str(path)!r} {what}; {hint}") from None
    raise InvalidArgument(f"{str(path)!r} is neither an .npz file nor a folder of .npy files; "
                          f"{hint}")


# -- parameters from the arrays' shapes -------------------------------------------------


def _direct_axes(op: Any, params: Params, name: str,
                 component: int | None = None) -> list[tuple[str, int]]:
    """The (input, axis) pairs whose size is the parameter ``name`` itself: they
    double when it doubles, and equal it."""
    value = params[name] if component is None else params[name][component]
    bumped = dict(params)
    if component is None:
        bumped[name] = value * 2
    else:
        pair = list(params[name])
        pair[component] = value * 2
        bumped[name] = tuple(pair)
    try:
        a = op.input_shapes(op.validate(params))
        b = op.input_shapes(op.validate(bumped))
    except (InvalidArgument, ValueError, KeyError):
        return []
    return [(k, ax) for k, s in a.items() for ax in range(len(s))
            if k in b and s[ax] == value and b[k][ax] == 2 * value]


def infer_params(op_name: str, arrays: Mapping[str, np.ndarray],
                 given: Mapping[str, Any] | None = None) -> Params:
    """The op's parameters from the shapes of ``arrays``: sizes read off the
    axes they size, flags from which inputs are present, other parameters
    (a KAN's grid size and spline order, a convolution's groups) searched;
    ``given`` ones are kept. Stride, padding and dilation cannot be read from
    shapes and take their defaults unless given."""
    op = get_op(op_name)
    given = dict(given or {})
    plan = op.plan or tuple(Dim(n) for n in op.param_names)
    fixed = dict(given)
    for spec in plan:
        if isinstance(spec, Flag) and spec.name not in fixed:
            fixed[spec.name] = spec.name in arrays  # bias=True where a bias is given
    params = smallest(plan, fixed)
    for spec in plan:
        if spec.name in given:
            continue
        if isinstance(spec, (Dim, Multiple)):
            for inp, ax in _direct_axes(op, params, spec.name):
                if inp in arrays and np.ndim(arrays[inp]) > ax:
                    params[spec.name] = int(np.shape(arrays[inp])[ax])
                    break
        elif isinstance(spec, Pair):
            pair = list(params[spec.name])
            for c in (0, 1):
                for inp, ax in _direct_axes(op, params, spec.name, c):
                    if inp in arrays and np.ndim(arrays[inp]) > ax:
                        pair[c] = int(np.shape(arrays[inp])[ax])
                        break
            params[spec.name] = tuple(pair)
    want = {k: tuple(np.shape(v)) for k, v in arrays.items()}

    def fits(p: Params) -> bool:
        try:
            shapes = op.input_shapes(op.validate(p))
        except (InvalidArgument, ValueError, KeyError):
            return False
        return {k: tuple(s) for k, s in shapes.items()} == want

    if fits(params):
        return op.validate(params)
    # parameters no axis shows directly: search small values (and the options of choices)
    free = [s for s in plan if s.name not in given and (
        isinstance(s, Choice) or (isinstance(s, (Dim, Multiple))
                                  and not _direct_axes(op, params, s.name)))]
    ranges = [list(s.options) if isinstance(s, Choice) else list(range(1, 65)) for s in free]
    for values in itertools.islice(itertools.product(*ranges), 20000):
        trial = {**params, **{s.name: v for s, v in zip(free, values, strict=True)}}
        if fits(trial):
            return op.validate(trial)
    try:
        expected: Any = op.input_shapes(op.validate(params))
    except InvalidArgument as exc:
        expected = f"no valid case: {exc}"
    raise InvalidArgument(
        f"the arrays' shapes {want} do not fit {op_name} with the parameters read from them "
        f"({params}, which give {expected}); name the inputs as {op_name} does "
        f"({sorted(op.input_shapes(op.validate(smallest(plan))))}) and give the parameters "
        "shapes cannot show with --param NAME=VALUE (stride, padding, dilation, groups)")


# -- the reason of a failure -------------------------------------------------------------


def reason(verdict: Verdict) -> tuple[str, str] | None:
    """What a failure is: (the failing output of the most specific diagnosis, its
    class: a logic bug in any output makes the failure a logic bug), or
    ("error", class) for a kernel error; None for a pass."""
    if verdict.passed:
        return None
    if verdict.error is not None:
        return ("error", verdict.failure_class)
    cause = verdict.cause
    return None if cause is None else (cause[0], cause[1].cls)


def _reasons(verdict: Verdict) -> set[tuple[str, str]]:
    if verdict.passed:
        return set()
    if verdict.error is not None:
        return {("error", verdict.failure_class)}
    return {(o.name, o.diagnosis.cls) for o in verdict.outputs.values() if not o.passed}


def _same_reason(want: tuple[str, str], got: set[tuple[str, str]]) -> bool:
    """The same output fails with the same class, or a stronger one: a failure a
    coarser precision explained may become one that no precision explains
    (``logic``); nothing else changes."""
    return want in got or (want[1].startswith("precision:") and (want[0], "logic") in got)


# -- the shrinker ------------------------------------------------------------------------


@dataclass
class ShrinkResult:
    """A shrunk case: the parameters and inputs before and after, the verdict of
    the last failing version, the runs it took."""

    op: str
    before: Params
    after: Params
    inputs_before: Arrays
    inputs_after: Arrays
    verdict: Verdict
    reason: tuple[str, str]
    runs: int = 0
    seconds: float = 0.0
    repro: str | None = None
    steps: list[str] = field(default_factory=list)

    @staticmethod
    def _size(arrays: Arrays) -> int:
        return int(sum(a.size for a in arrays.values()))

    def summary(self) -> dict[str, Any]:
        """Sizes before and after, and the cost, as plain data."""
        return {"op": self.op, "reason": list(self.reason),
                "reason_after": list(reason(self.verdict) or ()),
                "params_before": _plain(self.before), "params_after": _plain(self.after),
                "elements_before": self._size(self.inputs_before),
                "elements_after": self._size(self.inputs_after),
                "shapes_before": {k: list(v.shape) for k, v in self.inputs_before.items()},
                "shapes_after": {k: list(v.shape) for k, v in self.inputs_after.items()},
                "distinct_values_after": len(np.unique(np.concatenate(
                    [a.ravel() for a in self.inputs_after.values()] or [np.zeros(0)]))),
                "kernel_runs": self.runs, "seconds": round(self.seconds, 3),
                "repro": self.repro}


def _plain(p: Params) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in p.items()}


class _Budget(Exception):
    pass


class _Shrinker:
    def __init__(self, target: Target, op: str, storage: str, want: tuple[str, str],
                 max_runs: int, deadline: float, *, layouts: Mapping[str, str] | None = None,
                 timeout: float | None = None, isolate: bool = False) -> None:
        self.target, self.op, self.storage, self.want = target, get_op(op), storage, want
        self.fmt = get_format(storage)
        self.max_runs, self.deadline = max_runs, deadline
        self.layouts, self.timeout, self.isolate = dict(layouts or {}), timeout, isolate
        self.runs = 0
        self.last: Verdict | None = None

    def fails(self, params: Params, inputs: Arrays) -> bool:
        """Does this version fail for the same reason? (one kernel run)"""
        from .check import check_case  # noqa: PLC0415 - checking loads on use

        if self.runs >= self.max_runs or time.perf_counter() > self.deadline:
            raise _Budget
        self.runs += 1
        try:
            case = Case(self.op.name, params, storage=self.storage,
                        layouts={k: v for k, v in self.layouts.items() if k in inputs})
            if {k: tuple(s) for k, s in case.shapes().items()} != \
                    {k: v.shape for k, v in inputs.items()}:
                return False
            with np.errstate(all="ignore"):  # a degenerate candidate (zeroed knots) may warn
                v = check_case(case, self.target, inputs=inputs, with_diagnosis=False,
                               timeout=self.timeout, isolate=self.isolate)
        except (InvalidArgument, UnsupportedCase, ValueError, FloatingPointError):
            return False
        if _same_reason(self.want, _reasons(v)):
            self.last = v
            return True
        return False

    # -- structure --------------------------------------------------------------------
    def axes_of(self, params: Params, name: str, component: int | None = None
                ) -> list[tuple[str, int]]:
        return _direct_axes(self.op, params, name, component)

    def cut(self, params: Params, inputs: Arrays, new_params: Params,
            direct: list[tuple[str, int]], keep: np.ndarray | None) -> Arrays | None:
        """The inputs for ``new_params``: ``keep`` indices on the direct axes,
        the first entries on every other axis that shrank, zeros appended on an
        axis that grew (a convolution's output rows when its kernel shrinks);
        integer inputs clipped into their range for ``new_params``."""
        try:
            checked = self.op.validate(new_params)
            shapes = self.op.input_shapes(checked)
        except (InvalidArgument, ValueError):
            return None
        integers = self.op.integer_inputs(checked)
        out = {}
        for k, arr in inputs.items():
            if k not in shapes:
                continue  # e.g. the bias of a case without one
            new = shapes[k]
            if len(new) != arr.ndim:
                return None
            a = arr
            for ax, (n_old, n_new) in enumerate(zip(arr.shape, new, strict=True)):
                if n_new > n_old:
                    if (k, ax) in direct:
                        return None
                    pad = [(0, 0)] * a.ndim
                    pad[ax] = (0, n_new - n_old)
                    a = np.pad(a, pad)
                    continue
                if n_new == n_old:
                    continue
                if keep is not None and (k, ax) in direct and len(keep) == n_new:
                    a = np.take(a, keep, axis=ax)
                else:
                    a = np.take(a, np.arange(n_new), axis=ax)
            if k in integers:  # labels of a shrunk class count stay below it
                a = np.clip(a, integers[k].lo, integers[k].hi - 1)
            out[k] = np.ascontiguousarray(a)
        if set(out) != set(shapes):
            return None
        return out

    def ddmin_dim(self, params: Params, inputs: Arrays, name: str
                  ) -> tuple[Params, Arrays, bool]:
        """ddmin over the indices of dimension ``name``: the smallest index set kept."""
        direct = self.axes_of(params, name)
        n = int(params[name])
        if n <= 1:
            return params, inputs, False
        if not direct:  # no axis is this size itself (a KAN's grid size): step it down
            for value in dict.fromkeys((1, n // 2, n - 1)):
                trial = {**params, name: value}
                cand = self.cut(params, inputs, trial, [], None) if 0 < value < n else None
                if cand is not None and self.fails(trial, cand):
                    return self.op.validate(trial), cand, True
            return params, inputs, False
        granularity, progress = 2, False
        while n > 1:
            chunks = np.array_split(np.arange(n), min(granularity, n))
            # each chunk alone, then (finer than halves) every chunk but one
            subsets = [(c, True) for c in chunks] + (
                [(np.setdiff1d(np.arange(n), c), False) for c in chunks] if len(chunks) > 2
                else [])
            for sub, alone in subsets:
                trial = {**params, name: len(sub)}
                cand = self.cut(params, inputs, trial, direct, sub)
                if cand is not None and self.fails(trial, cand):
                    params, inputs, n = self.op.validate(trial), cand, len(sub)
                    granularity = 2 if alone else max(granularity - 1, 2)
                    progress = True
                    break
            else:
                if granularity >= n:
                    break
                granularity = min(granularity * 2, n)
        return params, inputs, progress

    def step_param(self, params: Params, inputs: Arrays, spec: Any
                   ) -> tuple[Params, Arrays, bool]:
        """A flag off, a choice or a pair stepped towards its smallest value."""
        name = spec.name
        trials: list[Any] = []
        if isinstance(spec, Flag) and params[name]:
            trials = [False]
        elif isinstance(spec, Choice):
            opts = list(spec.options)
            if params[name] in opts:
                trials = opts[:opts.index(params[name])]
        elif isinstance(spec, Pair):
            lo, pair = spec.min_value, tuple(params[name])
            trials = [t for t in ((lo, lo), (lo, pair[1]), (pair[0], lo),
                                  (max(lo, pair[0] - 1), max(lo, pair[1] - 1))) if t != pair]
        for value in trials:
            trial = {**params, name: value}
            cand = self.cut(params, inputs, trial, [], None)
            if cand is not None and self.fails(trial, cand):
                return self.op.validate(trial), cand, True
        return params, inputs, False

    def structure(self, params: Params, inputs: Arrays) -> tuple[Params, Arrays, bool]:
        plan = self.op.plan or tuple(Dim(n) for n in self.op.param_names)
        progress = False
        for spec in plan:
            if isinstance(spec, (Dim, Multiple)):
                params, inputs, moved = self.ddmin_dim(params, inputs, spec.name)
            elif isinstance(spec, (Flag, Choice, Pair)):
                params, inputs, moved = self.step_param(params, inputs, spec)
            else:
                continue
            progress |= moved
        return params, inputs, progress

    # -- values ---------------------------------------------------------------------------
    def _rounded(self, a: np.ndarray, bits: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            m, e = np.frexp(a)
            r = np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)
        r = np.where(np.isfinite(a), r, a)
        return quantize(r, self.fmt)

    def values(self, params: Params, inputs: Arrays) -> tuple[Arrays, bool]:
        progress = False
        integers = self.op.integer_inputs(params)
        for name in list(inputs):
            a = inputs[name]
            simpler: Iterator[np.ndarray] = iter(  # an integer input: zeros only
                [np.zeros_like(a)] + [self._rounded(a, b) for b in (1, 2, 4, 8)
                                      if name not in integers])
            for cand_arr in simpler:
                if np.array_equal(cand_arr, a, equal_nan=True):
                    continue
                cand = {**inputs, name: cand_arr}
                if self.fails(params, cand):
                    inputs, progress = cand, True
                    break
            a = inputs[name]
            if 1 < a.size <= 64:  # element by element to zero
                flat = a.ravel().copy()
                for i in np.flatnonzero(flat):
                    trial = flat.copy()
                    trial[i] = 0.0
                    cand = {**inputs, name: trial.reshape(a.shape)}
                    if self.fails(params, cand):
                        inputs, flat, progress = cand, trial, True
        return inputs, progress


def shrink(target: Target, op: str, params: Mapping[str, Any], inputs: Mapping[str, Any], *,
           max_runs: int = 2000, seconds: float = 600.0, values: bool = True,
           store: Path | str | None = None,
           on_step: Callable[[str], None] | None = None,
           layouts: Mapping[str, str] | None = None,
           timeout: float | None = DEFAULT_TIMEOUT, isolate: bool = False) -> ShrinkResult:
    """Shrink a failing case supplied from outside to the smallest version that
    still fails for the same reason; save it as a repro in ``store``.

    Parameters
    ----------
    target : Target
        The kernel to re-run (it must compute ``op`` under the claimed precision).
    op : str
        The op.
    params : dict
        The op's parameters (see :func:`infer_params` to read them off the arrays).
    inputs : dict of arrays
        The case's inputs by name, as the kernel took them (exact in the target's
        storage format).
    max_runs, seconds : int, float
        Budget of kernel runs and of time; the smallest failing version found by
        then is the result.
    values : bool
        Also simplify values (zeros, fewer significant bits).
    store : path or None
        Where to save the shrunk repro; None saves none.
    on_step : callable, optional
        Told a line per accepted step.
    layouts : dict, optional
        The layout of each input as the kernel takes it (as a case's
        ``layouts``); inputs not named are row-major. Kept while shrinking.
    timeout, isolate
        As for :func:`~numoracle.checking.check.check_case`, for every run.

    Raises
    ------
    InvalidArgument
        When the case does not fail to begin with, or an input is not exact in
        the target's storage format.
    """
    from .check import check_case  # noqa: PLC0415 - checking loads on use

    t0 = time.perf_counter()
    o = get_op(op)
    storage = target.precision.storage.name
    fmt = get_format(storage)
    ins: Arrays = {}
    integers = o.integer_inputs(o.validate(dict(params)))  # labels, indices: never rounded
    for k, v in inputs.items():
        a = np.asarray(v, dtype=np.float64)
        q = a if k in integers else quantize(a, fmt)
        if not np.array_equal(q, a, equal_nan=True):
            raise InvalidArgument(
                f"input {k!r} holds values that are not exact in {storage} (the storage of "
                f"{target.name!r}'s claim {target.precision.name}); give the arrays the kernel "
                "took, or claim the precision they are stored in")
        ins[k] = a
    p = o.validate(dict(params))
    lay = dict(layouts or {})
    case = Case(op, p, storage=storage, layouts=lay)
    first = check_case(case, target, inputs=ins,  # failing outputs are diagnosed anyway
                       timeout=timeout, isolate=isolate)
    want = reason(first)
    if want is None:
        raise InvalidArgument(
            f"the case does not fail on {target.name!r} claiming {target.precision.name}: "
            f"every output is within its bound ({first.diagnosis}); nothing to shrink (check "
            "the op, the parameters and the claimed precision)")
    s = _Shrinker(target, op, storage, want, max_runs, t0 + seconds, layouts=lay,
                  timeout=timeout, isolate=isolate)
    s.last = first
    before_p, before_in = dict(p), dict(ins)
    steps: list[str] = []
    try:
        while True:
            p, ins, moved = s.structure(p, ins)
            if moved:
                steps.append(f"structure: {_plain(p)}")
            if values:
                ins, vmoved = s.values(p, ins)
                if vmoved:
                    steps.append("values simplified")
                moved |= vmoved
            if on_step and moved:
                on_step(steps[-1])
            if not moved:
                break
    except _Budget:
        steps.append("budget spent")
    # labels and indices leave as the int64 the op takes them in (repros keep them so)
    ins = {k: v.astype(np.int64) if k in o.integer_inputs(p) else v for k, v in ins.items()}
    final = check_case(Case(op, p, storage=storage,
                            layouts={k: v for k, v in lay.items() if k in ins}),
                       target, inputs=ins, with_diagnosis=True, timeout=timeout, isolate=isolate)
    s.runs += 1
    if not _same_reason(want, _reasons(final)):  # flaky: the last failing run stands
        final = s.last if s.last is not None else first
    res = ShrinkResult(op, before_p, dict(p), before_in, ins, final, want, s.runs,
                       time.perf_counter() - t0, steps=steps)
    if store is not None:
        from ..store.repro import save_repro  # noqa: PLC0415 - only to save the result

        res.repro = str(save_repro(final, target, store=store, inputs=ins))
    return res
