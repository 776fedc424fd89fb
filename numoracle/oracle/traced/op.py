"""``TracedOp``: an op whose reference is a PyTorch function or module.

The op's inputs are declared with symbolic dimensions (``{"x": ("batch", "n")}``,
ints for fixed sizes) or given as example tensors (fixed shapes, as a
KernelBench problem's ``get_inputs()`` gives them); its dimensions are its
parameters, drawn by the case strategies like any op's (``dims={"n": (1, 4096)}``
bounds them). An ``nn.Module``'s parameters are inputs too (drawn from the value
families, handed to the kernel by name) and count as trained parameters
(:attr:`Op.parameters`). Outputs are named after the reference's result:
``out`` for one tensor, ``out0``, ``out1``, ... for a tuple, a dict's keys;
with ``grads=("x", ...)`` the op also takes ``grad_<output>`` for each output
and computes ``grad_x``, ...

Each case's reference is the reference's ATen graph (:mod:`.capture`)
evaluated by the bound interpreter (:mod:`.interpret`) under the claimed
precision model and :class:`~numoracle.oracle.traced.rules.Claims`: the bound
of the composition follows from one rule per ATen op. An op without a rule is
refused by name.

A traced op is made per reference, so it is registered by hand
(:func:`traced_op`); :meth:`TracedOp.spec` is the plain data that makes it again
(the reference as ``module:qualname``), which repros keep.

Examples
--------
>>> import torch
>>> op = TracedOp(torch.relu, inputs={"x": ("batch", "n")}, dims={"n": (1, 8)},
...               name="traced_relu_example")
>>> op.param_names, op.outputs({"batch": 2, "n": 3})
(('batch', 'n'), ('out',))
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...callables import digest, identity, load_ref, locate, location_text
from ...errors import InvalidArgument
from ..ops import OPS, register_op
from ..ops.base import IntegerInput, Op, Product
from ..ops.plan import Dim, Multiple
from ..precision import PrecisionModel
from ..tracked import Tracked, moved
from ..xp import array_module, device_of, is_torch, namespace_named, on_gpu, to_numpy
from .capture import Reference
from .capture import capture as capture_graph
from .facts import ShapeFacts, shape_facts
from .interpret import evaluate
from .library._common import as_judged
from .recording import Recordings, signature
from .recording import mode as recording_mode
from .rules import Claims, RuleContext

__all__ = ["TracedOp", "traced_op", "restore_op", "DEFAULT_DIM", "DEFAULT_BATCH",
           "resolve_reference", "NORMALISING", "GQA_RATIOS", "gqa_heads"]

#: the range a dimension is drawn in unless ``dims`` says otherwise
DEFAULT_DIM = (1, 64)
#: the range of a dimension named ``batch``
DEFAULT_BATCH = (1, 16)
#: shape facts kept per op (one per parameter set the strategies try)
_FACTS_KEPT = 4096
#: the query/key/value head ratios an attention reference is drawn (grouped-query
#: attention: 1 is multi-head, a ratio of all the query heads multi-query)
GQA_RATIOS = (1, 2, 4, 8)
#: the names an attention reference's query and key inputs go by
_QUERY, _KEY, _VALUE = ("q", "query"), ("k", "key"), ("v", "value")


def gqa_heads(declared: Mapping[str, Sequence[Any]]) -> tuple[str, str] | None:
    """``(query heads, key/value heads)``: the names of the third-from-last
    dimensions of an input named ``q``/``query`` and one named ``k``/``key``
    (and ``v``/``value``, where there is one, with the key's), where they differ:
    a reference that takes separate query and key/value head counts. None
    elsewhere."""
    def third(names: tuple[str, ...]) -> Any:
        found = [declared[n] for n in names if n in declared]
        return found[0][-3] if found and len(found[0]) >= 3 else None
    hq, hkv, hv = third(_QUERY), third(_KEY), third(_VALUE)
    if not (isinstance(hq, str) and isinstance(hkv, str)) or hq == hkv:
        return None
    if any(n in declared for n in _VALUE) and hv != hkv:
        return None
    return hq, hkv


#: ATen ops that normalise their input (shift-invariant, or invariant to the
#: scale of a row): a reference that calls one is drawn the workload families
#: (``rows``: shifted logits, attention sinks; ``large``: near overflow)
NORMALISING = frozenset({
    "_softmax", "_log_softmax", "_safe_softmax", "logsumexp", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
    "_fused_rms_norm", "rsqrt", "var", "var_mean", "std", "std_mean",
})


class _OpNames(TorchDispatchMode):
    """Records the name of every ATen op called while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.names.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def resolve_reference(ref: str) -> Any:
    """The object ``module:qualname`` or ``file.py:qualname`` names
    (``pkg.mod:fn``, ``refs.py:Block``), the module importable from the
    working folder (:func:`numoracle.callables.load_ref`)."""
    return load_ref(ref)


def _location(obj: Any) -> str | None:
    """``module:qualname`` (or ``file.py:qualname``) of ``obj`` where it can be
    found again, else None."""
    loc = locate(obj)
    return None if loc is None else location_text(
        {k: v for k, v in loc.items() if k != "file"} if "module" in loc else loc)


def _signature_names(fn: Any, count: int) -> tuple[str, ...]:
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= count:
        return tuple(p.name for p in params[:count])
    return tuple(f"in{i}" for i in range(count))


def _dims_of(inputs: Mapping[str, Sequence[Any]]) -> list[str]:
    names: list[str] = []
    for name, shape in inputs.items():
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
            raise InvalidArgument(f"inputs[{name!r}]={shape!r} must be a tuple of dimension "
                                  "names and ints, e.g. ('batch', 'n') or ('batch', 4)")
        for d in shape:
            if isinstance(d, str):
                if not d.isidentifier():
                    raise InvalidArgument(f"dimension {d!r} of inputs[{name!r}] must be an "
                                          "identifier")
                if d not in names:
                    names.append(d)
            elif isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
                raise InvalidArgument(f"inputs[{name!r}] has {d!r}; a dimension is a name or "
                                      "a positive int")
    return names


def _bound(name: str, which: str, v: Any, dims: Sequence[str]) -> int | str:
    """One end of an integer input's range: an int, or a dimension of the op."""
    if isinstance(v, str):
        if v not in dims:
            raise InvalidArgument(f"integers[{name!r}] has {which}={v!r}, which is no dimension "
                                  f"of the inputs {list(dims)}; use an int or one of them")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise InvalidArgument(f"integers[{name!r}] has {which}={v!r}; an end of the range is "
                              "an int or a dimension name, e.g. integers={'labels': (0, 'n')}")
    return int(v)


def _integer_specs(integers: Any, booleans: Any, declared: Mapping[str, Any],
                   grads: Sequence[str], ranges: Mapping[str, tuple[int, int]]
                   ) -> dict[str, tuple[int | str, int | str, str]]:
    """``{input: (lo, hi, dtype)}`` of the integer and boolean inputs, validated:
    declared inputs only, no gradient of one, and a range ``[lo, hi)`` that is
    not empty for any size the dimensions are drawn in."""
    if integers is None:
        integers = {}
    if not isinstance(integers, Mapping):
        raise InvalidArgument(f"integers={integers!r} must map input names to (lo, hi), e.g. "
                              "integers={'labels': (0, 'n')}")
    if isinstance(booleans, str) or not isinstance(booleans, (tuple, list)):
        raise InvalidArgument(f"booleans={booleans!r} must be a tuple of input names, e.g. "
                              f"booleans=({booleans!r},)")
    dims = list(ranges)
    specs: dict[str, tuple[int | str, int | str, str]] = {}
    for name, span in integers.items():
        if not isinstance(span, (tuple, list)) or len(span) != 2:
            raise InvalidArgument(f"integers[{name!r}]={span!r} must be (lo, hi): values are "
                                  "drawn in [lo, hi), e.g. (0, 'n') for class labels")
        specs[str(name)] = (_bound(name, "lo", span[0], dims), _bound(name, "hi", span[1], dims),
                            "int64")
    for name in booleans:
        if name in specs:
            raise InvalidArgument(f"input {name!r} is in both integers= and booleans=; a mask "
                                  "is given in booleans= only")
        specs[str(name)] = (0, 2, "bool")
    for name in specs:
        if name not in declared:
            raise InvalidArgument(f"integers/booleans name {name!r}, which is not a declared "
                                  f"input; the inputs are {list(declared)}")
        if name in grads:
            raise InvalidArgument(f"grads= asks the gradient of {name!r}, which holds integers "
                                  f"(no gradient exists); drop {name!r} from grads=")
    for name, (lo, hi, _) in specs.items():
        lo_max = ranges[lo][1] if isinstance(lo, str) else lo
        hi_min = ranges[hi][0] if isinstance(hi, str) else hi
        if hi_min > lo_max:
            continue
        where = " and ".join(f"{d}={v}" for d, v in ((lo, lo_max), (hi, hi_min))
                             if isinstance(d, str))
        fix = (f"draw {hi} from at least {lo_max + 1}, e.g. dims={{{hi!r}: ({lo_max + 1}, "
               f"{max(ranges[hi][1], lo_max + 1)})}}" if isinstance(hi, str)
               else f"make hi larger than {lo_max}")
        raise InvalidArgument(f"integers[{name!r}]=({lo!r}, {hi!r}) is empty"
                              f"{' when ' + where if where else ''}: values are drawn in "
                              f"[lo, hi), so hi must exceed lo for every drawn size; {fix}")
    return specs


def _from_examples(given: Mapping[str, torch.Tensor], integers: Any,
                   booleans: Any) -> tuple[Any, Any]:
    """``integers`` and ``booleans`` with the example tensors of integer dtype
    (drawn in ``[min, max + 1)`` of the example, as ``torch.randint`` made them)
    and of bool dtype added, unless named already."""
    named = set(integers or {}) | set(booleans if isinstance(booleans, (tuple, list)) else ())
    found = {k: v for k, v in given.items() if k not in named and not v.is_floating_point()
             and not v.is_complex()}
    if not found:
        return integers, booleans
    more = {k: (int(v.min()), int(v.max()) + 1) for k, v in found.items()
            if v.dtype != torch.bool and v.numel()}
    masks = tuple(k for k, v in found.items() if v.dtype == torch.bool)
    ints = {**dict(integers or {}), **more} if isinstance(integers, Mapping | None) else integers
    bools = (*booleans, *masks) if isinstance(booleans, (tuple, list)) else booleans
    return ints, bools


def _check_axes(axes: Any, declared: Mapping[str, tuple[Any, ...]]) -> dict[str, str]:
    """``axes`` validated: declared inputs, one axis letter per dimension."""
    if axes is None:
        return {}
    if not isinstance(axes, Mapping):
        raise InvalidArgument(f"axes={axes!r} must map input names to axis orders, e.g. "
                              "axes={'x': 'NCHW'}")
    for name, order in axes.items():
        if name not in declared:
            raise InvalidArgument(f"an axis order is given for {name!r}, which is not an input "
                                  f"of the reference; the inputs are {list(declared)}")
        if not isinstance(order, str) or len(order) != len(declared[name]):
            raise InvalidArgument(
                f"input {name!r} has {len(declared[name])} dimensions "
                f"{tuple(declared[name])}, and the axis order asked for it (a layout of "
                f"{order!r}) needs {len(str(order))}: an axis order applies to an input with "
                "one dimension per letter")
    return {str(k): str(v) for k, v in axes.items()}


def _range(name: str, spec: Any) -> tuple[int, int]:
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        spec = (1, int(spec))
    ok = (isinstance(spec, (tuple, list)) and len(spec) == 2
          and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in spec)
          and 1 <= spec[0] <= spec[1])
    if not ok:
        raise InvalidArgument(f"dims[{name!r}]={spec!r} must be (lo, hi) with 1 <= lo <= hi, "
                              "or hi, e.g. dims={'n': (1, 4096)}")
    return int(spec[0]), int(spec[1])


def _plan(ranges: Mapping[str, tuple[int, int]], gqa: tuple[str, str] | None
          ) -> tuple[Dim | Multiple, ...]:
    """Every dimension drawn in its range; an attention's query heads (``gqa``:
    see :func:`gqa_heads`), where their least is 1, drawn right after the
    key/value heads as a multiple of them by one of :data:`GQA_RATIOS`."""
    dims = {d: Dim(d, max_value=hi, is_batch=(d == "batch"), smallest=lo)
            for d, (lo, hi) in ranges.items()}
    if gqa is None or ranges[gqa[0]][0] != 1:
        return tuple(dims.values())
    hq, hkv = gqa
    out: list[Dim | Multiple] = []
    for d, spec in dims.items():
        if d != hq:
            out.append(spec)
        if d == hkv:
            out.append(Multiple(hq, hkv, ranges[hq][1], factors=GQA_RATIOS))
    return tuple(out)


class TracedOp(Op):
    """An op made from a PyTorch reference (see the module docstring).

    Parameters
    ----------
    reference : callable, nn.Module, nn.Module subclass or str
        ``f(*inputs, **params)``; a module class is made with ``init``; a
        string ``"module:qualname"`` is imported.
    inputs : mapping or sequence
        ``{name: (dim, ...)}`` with dimension names (str) and fixed sizes
        (int); or example tensors (a sequence, named after the reference's
        parameters, or a mapping by name): fixed shapes; an integer example
        (class labels of ``torch.randint``) is an integer input drawn in
        ``[min, max + 1)`` of its values, a bool one a mask.
    dims : mapping
        ``{dim: (lo, hi)}`` (or ``hi``): the range each dimension is drawn in
        (:data:`DEFAULT_DIM`; :data:`DEFAULT_BATCH` for ``batch``).
    params : mapping
        Fixed non-tensor keyword arguments of the reference.
    grads : sequence of str
        Inputs whose gradients the op computes (``grad_<input>``), taking
        ``grad_<output>`` for every output.
    name : str or None
        The op's name; ``traced_<reference name>`` by default.
    claims : mapping or None
        What the kernel claims beyond its formats, as :func:`Claims` makes
        (accuracy profile, transcendental ulps, variance, per-op or fused
        rounding): applied to the precision model a target claims.
    init : sequence
        Arguments that make a module class into a module.
    integers : mapping
        ``{input: (lo, hi)}``: inputs that hold integers (class labels,
        indices), drawn uniformly in ``[lo, hi)`` with ``lo`` and ``hi`` ints
        or dimension names (``(0, "n")``: a label below the class count of
        every case), never rounded to a storage format; the reference and the
        torch targets get them as ``torch.int64`` tensors.
    booleans : sequence of str
        Inputs that hold booleans (masks), drawn as ``True`` or ``False``
        with equal chance, handed over as ``torch.bool`` tensors.
    cache : bool
        Reuse captured graphs (False: trace every case again on its values;
        a reference whose Python reads input values is found and traced so
        without it).
    axes : mapping
        ``{input: "NCHW"}``: the axis order of an input as the reference
        takes it (an image ``NCHW``, a weight ``OIHW``), so that a kernel may
        take it in another (``layouts={"x": ("NHWC",)}`` of ``check_kernel``).
    """

    precision_ladder = "traced"

    def __init__(self, reference: Any, *, inputs: Any, dims: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None, grads: Sequence[str] = (),
                 name: str | None = None, claims: Claims | None = None,
                 init: Sequence[Any] = (), cache: bool = True,
                 integers: Mapping[str, Any] | None = None,
                 booleans: Sequence[str] = (),
                 axes: Mapping[str, str] | None = None) -> None:
        given_as = reference if isinstance(reference, str) else None
        if isinstance(reference, str):
            reference = resolve_reference(reference)
        module_ref = given_as is not None and not given_as.rpartition(":")[0].endswith(".py")
        self._where = given_as if module_ref else _location(  # a file: by its full path
            type(reference) if isinstance(reference, torch.nn.Module) else reference) \
            or given_as
        if isinstance(reference, type) and issubclass(reference, torch.nn.Module):
            reference = reference(*init)
        elif init:
            raise InvalidArgument("init= is for a module class; the reference is "
                                  f"{reference!r}")
        self._init = tuple(init)
        if isinstance(grads, str):
            raise InvalidArgument(f"grads={grads!r} must be a tuple of input names, e.g. "
                                  f"grads=({grads!r},)")
        self.examples: dict[str, tuple[int, ...]] | None = None
        given: dict[str, torch.Tensor] = {}
        if isinstance(inputs, Mapping) and inputs and all(
                isinstance(v, torch.Tensor) for v in inputs.values()):
            given = {str(k): v for k, v in inputs.items()}
            shapes = {k: tuple(v.shape) for k, v in given.items()}
        elif isinstance(inputs, (list, tuple)) and inputs and all(
                isinstance(v, torch.Tensor) for v in inputs):
            given = dict(zip(_signature_names(reference, len(inputs)), inputs, strict=True))
            shapes = {k: tuple(v.shape) for k, v in given.items()}
        elif isinstance(inputs, Mapping) and inputs:
            shapes = {str(k): tuple(v) if isinstance(v, (tuple, list)) else v
                      for k, v in inputs.items()}
        else:
            raise InvalidArgument(f"inputs={inputs!r} must name the reference's tensor inputs "
                                  "with their dimensions, e.g. inputs={'x': ('batch', 'n')}, "
                                  "or give example tensors")
        for k in shapes:
            if not k.isidentifier():
                raise InvalidArgument(f"input name {k!r} must be an identifier")
        self.declared: dict[str, tuple[Any, ...]] = shapes
        names = _dims_of(self.declared)
        dims = dict(dims or {})
        unknown = sorted(set(dims) - set(names))
        if unknown:
            raise InvalidArgument(f"dims names {unknown}, which no input uses; the dimensions "
                                  f"are {names}")
        self.ranges = {d: _range(d, dims.get(d, DEFAULT_BATCH if d == "batch" else DEFAULT_DIM))
                       for d in names}
        self.param_names = tuple(names)
        if isinstance(grads, (tuple, list)):
            grads = tuple(grads)
        integers, booleans = _from_examples(given, integers, booleans)
        self.integers = _integer_specs(integers, booleans, self.declared, grads, self.ranges)
        # a traced op's plan and trained parameters are its own, not its class's
        self.plan = _plan(self.ranges, gqa_heads(self.declared))  # type: ignore[misc]
        self.input_axes = MappingProxyType(_check_axes(axes, self.declared))  # type: ignore[misc]
        if claims is not None and not isinstance(claims, Mapping):
            raise InvalidArgument(f"claims={claims!r} must be numoracle.oracle.traced.Claims"
                                  "(...), e.g. Claims(rounding='fused')")
        self.claims = Claims(**(claims or {}))
        self.reference_fn = reference
        self.ref = Reference(reference, tuple(self.declared), params=params, grads=grads,
                             cache=cache)
        self.parameters = tuple(self.ref.state)  # type: ignore[misc]
        who = type(reference) if isinstance(reference, torch.nn.Module) else reference
        base = getattr(who, "__name__", "reference")
        if self._where is None:  # a lambda or local function: its name and content hash
            base = identity(who)
        base = re.sub(r"\W+", "_", str(base)).strip("_") or "reference"
        self.reference_hash = digest(who)
        self.name = name if name is not None else f"traced_{base}"
        if not isinstance(self.name, str) or not self.name.replace("-", "_").isidentifier():
            raise InvalidArgument(f"name={self.name!r} must be an identifier-like str")
        self._facts: dict[tuple[Any, ...], ShapeFacts] = {}
        self.recordings = Recordings()
        self._workload: tuple[str, ...] | None = None

    @property  # type: ignore[override]
    def value_families(self) -> tuple[str, ...]:
        """``("rows", "large")`` where the reference normalises (calls one of
        :data:`NORMALISING` on its smallest shapes), else none: the workload
        families drawn besides the general ones."""
        if self._workload is None:
            self._workload = ("rows", "large") if self._normalises() else ()
        return self._workload

    def _normalises(self) -> bool:
        """Whether the reference calls a normalising ATen op (one run on the
        meta device at the least sizes; False where it cannot run there)."""
        shapes = self._declared_shapes({d: lo for d, (lo, _hi) in self.ranges.items()})
        dtypes = self._dtypes()
        recorder = _OpNames()
        try:
            with self.ref.on_meta(True) as ref:
                tensors = {n: torch.empty(s, dtype=dtypes.get(n, torch.float64), device="meta")
                           for n, s in shapes.items()}
                with recorder:
                    ref.flat(tensors)
        except Exception:  # noqa: BLE001 - a reference that needs data: no workload families
            return False
        return bool(recorder.names & NORMALISING)

    # -- plain data --------------------------------------------------------------
    def spec(self) -> dict[str, Any] | None:
        """The JSON-ready arguments that make this op again (None where the
        reference cannot be found by import: a lambda, a local function)."""
        if self._where is None:
            return None
        spec = {"reference": self._where, "inputs": {k: list(v) for k, v in self.declared.items()},
                "dims": {k: list(v) for k, v in self.ranges.items()},
                "params": dict(self.ref.params), "grads": list(self.ref.grads),
                "name": self.name, "init": list(self._init), "cache": self.ref.cache,
                "claims": {k: dict(v) if isinstance(v, Mapping) else v
                           for k, v in self.claims.items()},
                "reference_hash": self.reference_hash}
        ints = {k: [lo, hi] for k, (lo, hi, dtype) in self.integers.items() if dtype == "int64"}
        if ints:  # absent where there are none, as specs made before integer inputs were
            spec["integers"] = ints
        bools = [k for k, (_, _, dtype) in self.integers.items() if dtype == "bool"]
        if bools:
            spec["booleans"] = bools
        if self.input_axes:
            spec["axes"] = dict(self.input_axes)
        try:  # as JSON gives it back (tuples as lists), or None where it cannot
            plain: dict[str, Any] = json.loads(json.dumps(spec))
        except (TypeError, ValueError):
            return None
        return plain

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> TracedOp:
        """Inverse of :meth:`spec`."""
        return cls(spec["reference"], inputs={k: tuple(v) for k, v in spec["inputs"].items()},
                   dims={k: tuple(v) for k, v in spec["dims"].items()},
                   params=spec.get("params") or {}, grads=tuple(spec.get("grads", ())),
                   name=spec["name"], init=tuple(spec.get("init", ())),
                   cache=spec.get("cache", True), claims=Claims(**spec.get("claims", {})),
                   integers={k: tuple(v) for k, v in spec.get("integers", {}).items()},
                   booleans=tuple(spec.get("booleans", ())), axes=spec.get("axes"))

    # -- the Op interface -----------------------------------------------------------
    def validate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self._reject_unknown(params)
        out: dict[str, Any] = {}
        for d, (lo, hi) in self.ranges.items():
            v = params.get(d)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise InvalidArgument(f"{self.name}: {d}={v!r} must be an int in [{lo}, {hi}]; "
                                      f"widen dims={{{d!r}: (lo, hi)}} to allow it")
            out[d] = int(v)
        return out

    def _declared_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = {k: tuple(int(params[d]) if isinstance(d, str) else int(d) for d in shape)
                  for k, shape in self.declared.items()}
        shapes.update(self.ref.parameter_shapes())
        return shapes

    def facts(self, params: Mapping[str, Any]) -> ShapeFacts:
        """Output shapes, longest reduction and products for ``params`` (one fake
        run of the reference, kept)."""
        key = tuple(int(params[d]) for d in self.param_names)
        found = self._facts.get(key)
        if found is None:
            if len(self._facts) >= _FACTS_KEPT:
                self._facts.clear()
            sizes = ", ".join(f"{d}={params[d]}" for d in self.param_names)
            declared = ", ".join(f"{k!r}: {v!r}" for k, v in self.declared.items())
            found = self._facts[key] = shape_facts(
                self.ref, self._declared_shapes(params), self._dtypes(),
                declared=f"inputs={{{declared}}}" + (f" with {sizes}" if sizes else ""))
        return found

    def notes(self) -> tuple[str, ...]:
        """A reference whose Python reads input values: captured for every case."""
        where = self.ref.reads_values
        if where is None:
            return ()
        return (f"the reference reads input values as Python numbers at {where}: its graph "
                "is captured again on every case's values (slower; each case judged with the "
                "branch its values take)",)

    def _dtypes(self) -> dict[str, torch.dtype]:
        """The torch dtype of each integer and boolean input."""
        return {k: getattr(torch, dtype) for k, (_, _, dtype) in self.integers.items()}

    def integer_inputs(self, params: Mapping[str, Any]) -> dict[str, IntegerInput]:
        """The integer and boolean inputs with their ranges resolved for ``params``."""
        def end(v: int | str) -> int:
            return int(params[v]) if isinstance(v, str) else v
        return {k: IntegerInput(end(lo), end(hi), dtype)
                for k, (lo, hi, dtype) in self.integers.items()}

    def _graded(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The reference's outputs (those that take a ``grad_<output>``)."""
        if not self.ref.grads:
            return ()
        grads = {f"grad_{g}" for g in self.ref.grads}
        return tuple(o for o in self.facts(params).outputs if o not in grads)

    def input_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = self._declared_shapes(params)
        if self.ref.grads:
            outs = self.facts(params).outputs
            shapes.update({f"grad_{o}": outs[o] for o in self._graded(params)})
        return shapes

    def outputs(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(self.facts(params).outputs)

    def output_shapes(self, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        return dict(self.facts(params).outputs)

    def reductions(self, params: Mapping[str, Any]) -> dict[str, int]:
        facts = self.facts(params)
        return dict.fromkeys(facts.outputs, facts.longest)

    def products(self, params: Mapping[str, Any]) -> tuple[Product, ...]:
        return tuple(Product(a, b, n) for a, b, n in self.facts(params).products)

    def context(self, model: PrecisionModel) -> RuleContext:
        """What the rules are evaluated under for a kernel claiming ``model``."""
        return RuleContext(model, self.claims)

    def reference(self, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any],
                  model: PrecisionModel, outputs: tuple[str, ...] = ()) -> dict[str, Tracked]:
        """The tracked outputs, evaluated where ``inputs`` live: on the host for
        host arrays; on their GPU for device arrays (CuPy's, or torch's CUDA
        tensors), in the GPU's namespace there (:func:`~numoracle.oracle.xp.on_gpu`:
        torch's, or CuPy where chosen), the results handed back in the inputs'
        namespace (through DLPack, no copy): no floating-point input, intermediate
        value or radius crosses to the host (integer inputs do: the rules index
        with host arrays)."""
        self._check_inputs(inputs, params)
        ctx, back = _placement(self.context(model), inputs)
        integers = self.integer_inputs(params)
        if ctx.xp is np:
            given = {k: np.asarray(to_numpy(v)) for k, v in inputs.items()}
            for k, spec in integers.items():
                given[k] = _as_integers(k, given[k], spec)
            seen: dict[str, Any] = given
        else:  # the capture sees the device's tensors (shapes and dtypes; no copy)
            given = {k: _as_integers(k, np.asarray(to_numpy(v)), integers[k])
                     if k in integers else v for k, v in inputs.items()}
            device = torch.device("cuda", ctx.device) if isinstance(ctx.device, int) \
                else ctx.device  # CuPy's device number, or torch's device
            seen = {k: _tensor(v, device) for k, v in given.items()}
        values = {n: seen[n] for n in self.ref.names}
        cotangents = {f"grad_{o}": seen[f"grad_{o}"] for o in self._graded(params)}
        graph = capture_graph(self.ref, values, cotangents)
        how = recording_mode()
        got = None if how == "off" else self._recorded(graph, seen, given, ctx, outputs, how)
        if got is None:
            got = evaluate(graph, given, ctx, outputs)
        return {k: back(_arrays(as_judged(v))) for k, v in got.items()}

    def _recorded(self, graph: Any, seen: Mapping[str, torch.Tensor], given: Mapping[str, Any],
                  ctx: RuleContext, outputs: tuple[str, ...], how: str
                  ) -> Mapping[str, Any] | None:
        """The case's outputs by a recording of its evaluation in torch's namespace, on
        the device of its inputs (:mod:`.recording`), or None where it is to be
        evaluated as usual."""
        tensors = {k: v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v))
                   for k, v in seen.items() if k in given}
        floats = {k: v for k, v in tensors.items() if v.is_floating_point()}
        if not floats:
            return None
        device = next(iter(floats.values())).device
        xp = namespace_named("torch")
        torch_ctx = replace(ctx, xp=xp, device=device)
        fixed = {k: v for k, v in given.items() if k not in floats}
        key = signature(id(graph), {**floats, **fixed},
                        (repr(ctx.model), repr(ctx.claims), outputs, str(device)))
        got = self.recordings.evaluate(
            key, lambda fl: evaluate(graph, {**fixed, **fl}, torch_ctx, outputs), floats, xp, how)
        if got is None or ctx.xp is not np:
            return got
        return {k: v.to_host() if isinstance(v, Tracked) else v for k, v in got.items()}

    def __repr__(self) -> str:
        return f"<traced op {self.name}: {self.ref.describe()}>"


def _gpu_index(v: Any) -> int | None:
    """The GPU that holds array or tensor ``v`` (None on the host)."""
    xp = array_module(v)
    if xp is np:
        return None
    if is_torch(xp):
        device = device_of(v)
        return device.index if device.type == "cuda" else None
    return int(v.device.id)


def _placement(ctx: RuleContext, inputs: Mapping[str, Any]
               ) -> tuple[RuleContext, Callable[[Tracked], Tracked]]:
    """Where a case's reference is evaluated: ``ctx`` in the GPU's namespace
    (:func:`~numoracle.oracle.xp.on_gpu`) on the GPU that holds a device input
    (CuPy's or torch's), else on the host (torch on the CPU too: the host's NumPy
    does the same, faster); and what hands a result back in the namespace of
    those inputs."""
    for v in inputs.values():
        index = _gpu_index(v)
        if index is None:
            continue
        xp, device = on_gpu(index)
        return replace(ctx, xp=xp, device=device), partial(_handed, array_module(v), index)
    return ctx, lambda t: t


def _handed(xp: Any, index: int, t: Tracked) -> Tracked:
    """``t`` in the namespace ``xp`` a case's inputs came in, on GPU ``index``
    (through DLPack where it was computed in the other)."""
    return moved(t, xp, torch.device("cuda", index) if is_torch(xp) else None)


def _tensor(a: Any, device: torch.device | None) -> Any:
    """A CuPy array or torch's array as a tensor on its device (no copy); a host
    array copied to ``device`` (an integer input, or a host input beside device ones)."""
    mod = type(a).__module__
    if mod.startswith("cupy"):
        return torch.from_dlpack(a)
    if isinstance(a, torch.Tensor):
        return a
    if mod.startswith("torch"):
        return namespace_named("torch").tensor(a)
    return torch.as_tensor(np.asarray(a), device=device)


def _arrays(t: Tracked) -> Tracked:
    """``t`` with every field an array (rules on 0-d values may leave NumPy scalars)."""
    fields = {f: getattr(t, f) for f in ("value", "ref_err", "det", "prob", "mag", "lo")}
    if all(v is None or hasattr(v, "shape") for v in fields.values()):
        return t
    xp = t.xp
    fixed: dict[str, Any] = {f: v if v is None or hasattr(v, "shape")
                             else xp.asarray(v, dtype=xp.float64) for f, v in fields.items()}
    return replace(t, **fixed)


def _as_integers(name: str, values: np.ndarray, spec: IntegerInput) -> np.ndarray:
    """``values`` of integer input ``name`` in its dtype, refusing any that is
    not an integer (a float of an outside array that is not whole)."""
    cast = values.astype(spec.dtype)
    if values.dtype != cast.dtype and not np.array_equal(cast.astype(np.float64),
                                                         values.astype(np.float64)):
        raise InvalidArgument(f"input {name!r} holds values that are not {spec.dtype} (e.g. "
                              f"{values.reshape(-1)[0]!r}); give its integers as they are")
    return cast


def traced_op(reference: Any, **kwargs: Any) -> TracedOp:
    """A :class:`TracedOp` (``TracedOp(reference, **kwargs)``) registered as an op,
    so that cases, checks, repros and replay find it by name.

    An op of the same name and the same :meth:`~TracedOp.spec` is reused.

    Raises
    ------
    InvalidArgument
        When another op has that name: give ``name=``.
    """
    op = reference if isinstance(reference, TracedOp) else TracedOp(reference, **kwargs)
    old = OPS.get(op.name)
    if old is not None and old is not op:
        same = isinstance(old, TracedOp) and (
            old.spec() == op.spec() if op.spec() is not None
            else old.reference_fn is op.reference_fn and old.declared == op.declared
            and old.ranges == op.ranges and old.ref.grads == op.ref.grads
            and old.claims == op.claims and old.ref.params == op.ref.params
            and old.integers == op.integers and old.input_axes == op.input_axes)
        if not same:
            raise InvalidArgument(f"an op named {op.name!r} exists already ({old!r}); give "
                                  "this reference another name=")
        return old  # type: ignore[return-value]
    register_op(op)
    return op


def restore_op(spec: Mapping[str, Any]) -> TracedOp:
    """The registered traced op that ``spec`` (:meth:`TracedOp.spec`) describes,
    made and registered where it is not (a repro replayed in a new process)."""
    old = OPS.get(spec["name"])
    if isinstance(old, TracedOp) and old.spec() == dict(spec):
        return old
    return traced_op(TracedOp.from_spec(spec))
