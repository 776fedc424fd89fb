"""The declarative argument spec of a kernel written in another language.

A foreign kernel is called with a flat list of C arguments. The spec says what
each one is, by the names the op uses:

``"x"``, ``"weight"``, ``"y"``
    an array: an input or an output of the op (a pointer; NULL where the case
    has no such array, e.g. ``bias`` of a case without a bias);
``"w1"`` where the op has ``w1`` as an input and as an output
    an in-out array: the kernel reads it and updates it in place (a training
    or optimizer step); numoracle hands over a copy of the input and reads the
    output back from the same memory;
``"batch"``, ``"kernel_size[0]"``, ``"prod(batch_shape)"``, ``"param:bias"``
    a dimension or flag of the op's parameters (an integer; ``[i]`` takes one
    entry of a pair, ``prod(...)`` multiplies a shape, ``param:`` forces the
    parameter where an array has the same name);
``"lr:float32"``, ``"eps:float64"``
    a number parameter of the op passed as a C float or double;
``"stream"``
    the current CUDA stream (GPU kernels; a ``void*``);
``"=1.5:float64"``, ``"=0:int32"``
    a constant scalar of a C type.

A dimension carries its C type after a colon: ``"batch:int64"``,
``"batch:size_t"``; **without one it is a 32-bit** ``int``, so a kernel taking
``size_t`` or ``int64_t`` dimensions needs the suffix (a mismatch reads garbage
sizes: with isolation, the default on the CPU, that is a failing verdict, not
a crash of the checking process). Every array has a dtype (the storage format of the claimed
precision; a different one is refused) and a layout: ``C`` (row-major) or
``F`` (column-major) of the op's axis order, or, for arrays with named axes, an
axis order such as ``"OHWI"`` or ``"HWIO:F"`` (see
:mod:`numoracle.cases.layouts`).

Steps
-----
An op with a ``steps`` parameter (``mlp_train``, ``optim``) computes several
steps per case, one row of each output per step. A spec that leaves
``steps`` out describes a kernel that makes **one** step: it is called once per
step, with that step's row of every input that has one (``x[k]``,
``labels[k]``), its in-out arrays carrying the state from step to step, and
each output's row ``k`` read back after call ``k``. State reaches the next step
only through in-out arrays.

Examples
--------
>>> s = ArgSpec.build("linear", ["x", "weight", "y", "batch", "in_features",
...                              "out_features"], precision="fp32", layouts={"weight": "F"})
>>> [a.text for a in s.args]
['x', 'weight', 'y', 'batch:int32', 'in_features:int32', 'out_features:int32']
>>> s.layout("weight"), s.layout("x"), s.outputs
('F', 'C', ('y',))
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cases.layouts import layouts_for, parse
from ..errors import InvalidArgument, UnsupportedCase
from ..oracle.ops import get_op
from ..oracle.ops.plan import Choice, Derived, Dim, Flag, Multiple, Pair, Shape, Widths, smallest
from ..oracle.formats import FORMATS
from ..oracle.precision import PrecisionModel, get_model

__all__ = ["Arg", "ArgSpec", "ParamReader", "CTYPES", "STORAGE_DTYPES", "array_names"]

#: C types of dimensions and scalars
CTYPES: Mapping[str, Any] = {
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "size_t": ctypes.c_size_t,
    "float32": ctypes.c_float, "float64": ctypes.c_double,
}
#: C types a parameter may be passed as
INT_CTYPES = ("int32", "int64", "size_t")
FLOAT_CTYPES = ("float32", "float64")
#: the dtype of an array of each storage format
STORAGE_DTYPES = {f.name: f.torch for f in FORMATS.values() if f.storable}

_DIM_RE = re.compile(r"^(?:param:)?(?P<name>[A-Za-z_]\w*)(?:\[(?P<index>\d+)\])?$")
_PROD_RE = re.compile(r"^prod\((?P<name>[A-Za-z_]\w*)\)$")
_SCALAR_RE = re.compile(r"^=(?P<value>[^:]+):(?P<ctype>\w+)$")


@dataclass(frozen=True)
class Arg:
    """One C argument.

    ``kind`` is ``"array"``, ``"dim"``, ``"stream"`` or ``"scalar"``; ``name``
    the array or parameter name; ``index`` an entry of a pair (None: the whole
    value); ``prod`` whether a shape is multiplied out; ``ctype`` the C type of
    a dimension or scalar; ``value`` a scalar's constant.
    """

    kind: str
    name: str = ""
    index: int | None = None
    prod: bool = False
    ctype: str = "int32"
    value: float = 0.0

    @property
    def text(self) -> str:
        """The argument as the spec writes it (what :meth:`ArgSpec.build` reads back)."""
        if self.kind in ("array", "stream"):
            return self.name or "stream"
        if self.kind == "scalar":
            v = int(self.value) if self.ctype.startswith("int") else self.value
            return f"={v!r}:{self.ctype}"
        body = f"prod({self.name})" if self.prod else (
            f"{self.name}[{self.index}]" if self.index is not None else self.name)
        return f"{body}:{self.ctype}"

    def dim_value(self, params: Mapping[str, Any]) -> int | float:
        """This parameter's value for a case with ``params`` (a float for a
        parameter passed as a C float or double)."""
        v = params[self.name]
        if self.ctype in FLOAT_CTYPES:
            return float(v)
        if self.prod:
            return int(math.prod(v))
        if self.index is not None:
            return int(v[self.index])
        return int(v)


def _params_of(op_name: str, flags: bool = True) -> dict[str, Any]:
    """Valid parameters of ``op_name`` with every flag set to ``flags`` (the smallest otherwise)."""
    op = get_op(op_name)
    plan = op.draw_plan()
    fixed = {s.name: flags for s in plan if isinstance(s, Flag)}
    return op.validate({**dict.fromkeys(op.param_names, 1), **smallest(plan, fixed)})


@functools.lru_cache(maxsize=64)
def array_names(op_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every input and every output ``op_name`` can have: each flag on, and
    every combination of its choices (an optimizer's state outputs exist only
    for some optimizers), in the op's order."""
    op = get_op(op_name)
    base = _params_of(op_name)
    choices = [s for s in op.draw_plan() if isinstance(s, Choice)]
    ins: dict[str, None] = dict.fromkeys(op.input_shapes(base))
    outs: dict[str, None] = dict.fromkeys(op.outputs(base))
    for combo in itertools.product(*(c.options for c in choices)):
        try:
            chosen = {c.name: v for c, v in zip(choices, combo, strict=True)}
            params = op.validate({**base, **chosen})
        except InvalidArgument:
            continue
        ins.update(dict.fromkeys(op.input_shapes(params)))
        outs.update(dict.fromkeys(op.outputs(params)))
    return tuple(ins), tuple(outs)


def stepped_arrays(op_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The inputs, and the outputs, of ``op_name`` whose first axis is ``steps``."""
    op = get_op(op_name)
    if "steps" not in op.param_names:
        return (), ()
    big = _roomy(op_name)
    other = op.validate({**big, "steps": big["steps"] + 1})

    def rows(a: Mapping[str, tuple[int, ...]], b: Mapping[str, tuple[int, ...]]
             ) -> tuple[str, ...]:
        return tuple(n for n in a if a[n] and b.get(n) and a[n][0] != b[n][0]
                     and a[n][1:] == b[n][1:])

    return (rows(op.input_shapes(big), op.input_shapes(other)),
            rows(op.output_shapes(big), op.output_shapes(other)))


def _shapes(op_name: str, params: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    op = get_op(op_name)
    return {**op.input_shapes(params), **op.output_shapes(params)}


def _variants(value: Any) -> list[Any]:
    """Other values of a parameter, to see which arrays it shapes."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [v for v in (value + 1, value * 2, value // 2, value - 1) if v >= 1]
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return [(value[0] + 1, value[1]), (value[0], value[1] + 1),
                (max(0, value[0] - 1), value[1]), (value[0], max(0, value[1] - 1))]
    if isinstance(value, tuple):
        return [value + (2,), value[:-1]] if value else [(2,), (3, 2)]
    return []


def _roomy(op_name: str) -> dict[str, Any]:
    """Valid parameters where every parameter matters to some shape if it can."""
    op = get_op(op_name)
    base = _params_of(op_name)
    big = {k: (6 if isinstance(v, int) and not isinstance(v, bool) else
               (2, 2) if isinstance(v, tuple) and len(v) == 2 and k != "widths" else
               (2,) if isinstance(v, tuple) and k != "widths" else v)
           for k, v in base.items()}
    try:
        return op.validate(big)
    except InvalidArgument:
        return base


@dataclass(frozen=True)
class ArgSpec:
    """A validated argument spec: the C arguments in order, the dtype and the
    layout of every array. Build it with :meth:`build`."""

    op: str
    args: tuple[Arg, ...]
    dtype: str
    layouts: Mapping[str, str]

    @property
    def arrays(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.args if a.kind == "array")

    @property
    def outputs(self) -> tuple[str, ...]:
        """The op outputs the kernel writes."""
        outs = array_names(self.op)[1]
        return tuple(n for n in self.arrays if n in outs)

    @property
    def inputs(self) -> tuple[str, ...]:
        ins = array_names(self.op)[0]
        return tuple(n for n in self.arrays if n in ins)

    @property
    def inouts(self) -> tuple[str, ...]:
        """The arrays the kernel reads and updates in place (op inputs that are
        also op outputs of the same name)."""
        ins, outs = array_names(self.op)
        return tuple(n for n in self.arrays if n in ins and n in outs)

    @property
    def stepped(self) -> bool:
        """Whether the kernel makes one step per call (see Steps above)."""
        return "steps" in get_op(self.op).param_names and not any(
            a.kind == "dim" and a.name == "steps" for a in self.args)

    @property
    def stepped_arrays(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The inputs, and the outputs, with one row per step (their first axis)."""
        return stepped_arrays(self.op) if self.stepped else ((), ())

    def layout(self, name: str) -> str:
        """The declared layout of array ``name`` (``"C"`` unless the spec says otherwise)."""
        return self.layouts.get(name, "C")

    def axes(self, name: str) -> str | None:
        """The op's canonical axis order of array ``name`` (None: no named axes)."""
        op = get_op(self.op)
        return op.input_axes.get(name) or op.output_axes.get(name)

    def order_and_memory(self, name: str) -> tuple[str | None, str]:
        """The axis order (None: canonical) and memory order (``C``/``F``) of array ``name``."""
        lay = parse(self.layout(name), self.axes(name))
        return (lay.order if lay.order != self.axes(name) else None), lay.memory

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what :meth:`build` takes back."""
        return {"op": self.op, "args": [a.text for a in self.args], "dtype": self.dtype,
                "layouts": dict(self.layouts)}

    @classmethod
    def build(cls, op: str, args: Sequence[str], *, precision: str | PrecisionModel = "fp32",
              layouts: Mapping[str, str] | str | None = None,
              dtypes: Mapping[str, str] | str | None = None,
              check_dims: bool = True) -> ArgSpec:
        """Parse and validate ``args`` against ``op``; InvalidArgument before any call.

        Parameters
        ----------
        op : str
            The op the kernel computes.
        args : sequence of str
            The C arguments in order (see the module docstring).
        precision : str or PrecisionModel
            The claimed model; its storage format fixes the arrays' dtype.
        layouts : mapping or str, optional
            Layout of each array by name, or one memory order (``"C"``/``"F"``)
            for every array; arrays left out are row-major.
        dtypes : mapping or str, optional
            The dtype of each array (or of all): checked against the storage format.
        """
        o = get_op(op)
        integers = sorted(o.integer_inputs(_params_of(op)))
        if integers:
            raise InvalidArgument(
                f"op {op!r} has integer inputs {integers}; foreign targets exchange "
                "floating-point arrays of the storage format only: wrap the kernel in a "
                "Python function on the torch-cpu or numpy backend and check it with "
                "check_kernel(fn, reference=...)")
        model = get_model(precision)
        dtype = STORAGE_DTYPES[model.storage.name]
        if isinstance(args, str) or not isinstance(args, Sequence) or not args:
            raise InvalidArgument(f"args={args!r} must be a non-empty list of argument names, "
                                  "e.g. ['x', 'weight', 'y', 'batch', 'in_features']")
        inputs, outputs = array_names(op)
        parsed = [cls._parse(op, a, inputs, outputs) for a in args]
        arrays = [a.name for a in parsed if a.kind == "array"]
        dup = sorted({n for n in arrays if arrays.count(n) > 1})
        if dup:
            raise InvalidArgument(f"args={list(args)!r} names the arrays {dup} more than once; "
                                  "pass each array once")
        if not any(n in outputs for n in arrays):
            raise InvalidArgument(f"args={list(args)!r} names no output of {op}; name at least "
                                  f"one of {outputs}, where the kernel writes its result")
        # layouts
        lay_map: dict[str, str]
        if layouts is None:
            lay_map = {}
        elif isinstance(layouts, str):
            if layouts not in ("C", "F"):
                raise InvalidArgument(f"layouts={layouts!r}: one layout for every array must "
                                      "be 'C' (row-major) or 'F' (column-major); give a "
                                      "mapping for axis orders, e.g. {'weight': 'HWIO'}")
            lay_map = dict.fromkeys(arrays, layouts)
        elif isinstance(layouts, Mapping):
            lay_map = dict(layouts)
        else:
            raise InvalidArgument(f"layouts={layouts!r} must map array names to layouts, "
                                  "e.g. {'weight': 'OIHW:F'}, or be 'C' or 'F'")
        for name, lay in lay_map.items():
            if name not in arrays:
                raise InvalidArgument(f"layouts names {name!r}, which is not an array of the "
                                      f"spec; its arrays are {arrays}")
            axes = o.input_axes.get(name) or o.output_axes.get(name)
            valid = tuple(v for v in layouts_for(axes) if v not in ("T", "S"))
            if lay not in valid:
                raise InvalidArgument(f"layout {lay!r} of {name!r} must be one of {valid} "
                                      "(row- or column-major of an axis order)")
        # dtypes
        if dtypes is not None:
            dmap = dict.fromkeys(arrays, dtypes) if isinstance(dtypes, str) else dict(dtypes)
            for name, dt in dmap.items():
                if name not in arrays:
                    raise InvalidArgument(f"dtypes names {name!r}, which is not an array of "
                                          f"the spec; its arrays are {arrays}")
                if str(dt) != dtype:
                    raise InvalidArgument(
                        f"dtype {dt!r} of {name!r} does not match precision "
                        f"{model.name!r}, whose arrays are {dtype}; claim a precision "
                        f"stored in {dt} or hand the kernel {dtype} arrays")
        spec = cls(op, tuple(parsed), dtype, lay_map)
        spec._check_inouts()
        if check_dims:
            spec._check_dimensions()
        return spec

    def _check_inouts(self) -> None:
        """An in-out array's output must be its input's shape (one per step)."""
        if not self.inouts:
            return
        o = get_op(self.op)
        big = _roomy(self.op)
        ins, outs = o.input_shapes(big), o.output_shapes(big)
        for n in self.inouts:
            want = (big["steps"], *ins[n]) if self.stepped else ins[n]
            if outs[n] != want:
                fix = ("leave 'steps' out of the spec, so that the kernel is called once "
                       "per step" if "steps" in o.param_names else
                       f"pass the output {n} as its own array")
                raise InvalidArgument(
                    f"args={[a.text for a in self.args]!r}: {n!r} is read and updated in place "
                    f"(an input and an output of {self.op}), but the output has shape "
                    f"{outs[n]} where the input has {ins[n]}; {fix}")

    @staticmethod
    def _parse(op: str, text: Any, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> Arg:
        o = get_op(op)
        if not isinstance(text, str):
            raise InvalidArgument(f"argument {text!r} must be a str such as 'x', 'batch', "
                                  "'kernel_size[0]:int64' or '=1.0:float32'")
        if text in inputs or text in outputs:
            return Arg("array", text)
        if text == "stream":
            return Arg("stream", "stream")
        m = _SCALAR_RE.match(text)
        if m:
            ctype = m["ctype"]
            if ctype not in CTYPES:
                raise InvalidArgument(f"scalar {text!r}: C type {ctype!r} is unknown; use one "
                                      f"of {sorted(CTYPES)}")
            try:
                value = float(m["value"])
            except ValueError:
                raise InvalidArgument(f"scalar {text!r}: {m['value']!r} is not a number; "
                                      "write e.g. '=0.5:float32'") from None
            return Arg("scalar", ctype=ctype, value=value)
        body, _, ctype = text.removeprefix("param:").partition(":")
        ctype = ctype or "int32"
        if ctype not in INT_CTYPES + FLOAT_CTYPES:
            raise InvalidArgument(f"parameter {text!r}: C type {ctype!r} must be one of "
                                  f"{INT_CTYPES + FLOAT_CTYPES} (int32 when left out)")
        pm = _PROD_RE.match(body)
        dm = _DIM_RE.match(body)
        name = pm["name"] if pm else dm["name"] if dm else None
        if name is None or name not in o.param_names:
            raise InvalidArgument(
                f"argument {text!r} is neither an array nor a parameter of {op}: arrays are "
                f"{inputs + outputs}, parameters {o.param_names}; dimensions may take an "
                "entry ('kernel_size[0]') or a product ('prod(batch_shape)'), scalars are "
                "written '=VALUE:CTYPE'")
        value = _params_of(op)[name]
        if ctype in FLOAT_CTYPES:
            if pm or (dm and dm["index"] is not None) or isinstance(value, (bool, tuple, str)):
                raise InvalidArgument(f"{text!r}: only a number parameter can be passed as "
                                      f"{ctype}; {name!r} is {value!r} in a case")
            return Arg("dim", name, None, False, ctype)
        index = int(dm["index"]) if dm and dm["index"] is not None else None
        if pm and not isinstance(value, tuple):
            raise InvalidArgument(f"{text!r}: prod() takes a shape parameter; {name!r} is not one")
        if index is not None and not (isinstance(value, tuple) and index < 2):
            raise InvalidArgument(f"{text!r}: [{index}] takes entry 0 or 1 of a pair; "
                                  f"{name!r} is not a pair or has no entry {index}")
        if not pm and index is None and isinstance(value, tuple):
            raise InvalidArgument(f"{text!r}: {name!r} is a pair or shape; pass its entries "
                                  f"('{name}[0]', '{name}[1]') or 'prod({name})'")
        return Arg("dim", name, index, bool(pm), ctype)

    def _check_dimensions(self) -> None:
        """Every parameter that shapes an array of the spec must be passed."""
        o = get_op(self.op)
        big = _roomy(self.op)
        shapes = _shapes(self.op, big)
        dims = [a for a in self.args if a.kind == "dim"]
        missing = []
        for name, value in big.items():
            if name == "steps":
                continue  # left out: the kernel makes one step per call
            for variant in _variants(value):
                try:
                    other = o.validate({**big, name: variant})
                except InvalidArgument:
                    continue
                changed = _shapes(self.op, other)
                if any(changed.get(a) != shapes.get(a) for a in self.arrays):
                    mine = [d for d in dims if d.name == name]
                    whole = any(d.prod or d.index is None for d in mine)
                    both = {d.index for d in mine} >= {0, 1}
                    if not (whole or both):
                        missing.append(name)
                    break
        if missing:
            raise InvalidArgument(
                f"args={[a.text for a in self.args]!r} leave out {missing}, which shape the "
                f"arrays {list(self.arrays)} of {self.op}: the kernel could not know their "
                f"sizes; add them (pairs as 'name[0]', 'name[1]', shapes as 'prod(name)')")


class ParamReader:
    """Reads a case's parameters back from the shapes of its inputs, for ops
    that call targets without ``params`` (their shapes tell every parameter:
    ``linear``, ``matmul``; or the op reads them from the shapes itself:
    :meth:`~numoracle.oracle.ops.base.Op.params_from_shapes`, ``kan``)."""

    def __init__(self, op_name: str) -> None:
        self.op = get_op(op_name)
        plan = self.op.draw_plan()
        self.computed = self.op.params_from_shapes(
            self.op.input_shapes(_params_of(op_name))) is not None
        unsupported = [s.name for s in plan
                       if isinstance(s, (Pair, Choice, Widths, Multiple, Derived))]
        if unsupported and not (self.op.passes_params or self.computed):
            raise InvalidArgument(
                f"op {op_name!r} has parameters {unsupported} that foreign targets cannot read "
                "from the shapes of its inputs; foreign targets support ops whose shapes "
                "tell every parameter (linear, matmul, kan) or that pass them (conv2d)")
        self.flags = {s.name: s for s in plan if isinstance(s, Flag)}
        self.shape_params = [s.name for s in plan if isinstance(s, Shape)]
        self.positions: dict[str, tuple[str, int]] = {}
        primes = (p for p in itertools.count(7) if all(p % q for q in range(2, p)))
        params: dict[str, Any] = {}
        self.flag_arrays: dict[str, list[str]] = {}
        if self.op.passes_params or self.computed:
            return
        for s in plan:  # here every spec is a Flag, a Shape or a Dim
            params[s.name] = True if isinstance(s, Flag) else () if isinstance(s, Shape) \
                else next(primes)
        self.base = self.op.validate(params)
        shapes = self.op.input_shapes(self.base)
        for s in plan:
            if isinstance(s, Dim):
                where = [(n, i) for n, sh in shapes.items() for i, d in enumerate(sh)
                         if d == params[s.name]]
                if not where:
                    raise InvalidArgument(f"op {op_name!r}: parameter {s.name!r} shapes no input")
                self.positions[s.name] = where[0]
        for f in self.flags:
            off = self.op.input_shapes(self.op.validate({**self.base, f: False}))
            self.flag_arrays[f] = sorted(set(shapes) - set(off))

    def read_fixed(self, inputs: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters of the case whose inputs are ``inputs``; UnsupportedCase
        where they differ from those the kernel fixes (``fixed``, JSON-ready)."""
        params = self.read(inputs)
        differs = {k: params.get(k) for k, v in fixed.items()
                   if (list(p) if isinstance(p := params.get(k), tuple) else p) != v}
        if differs:
            raise UnsupportedCase(f"the kernel fixes {dict(fixed)}, and this case has {differs}")
        return params

    def read(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters of the case whose inputs are ``inputs``."""
        if "params" in inputs:
            return dict(inputs["params"])
        if self.computed:
            params = self.op.params_from_shapes(
                {k: tuple(v.shape) for k, v in inputs.items() if v is not None})
            assert params is not None
            return params
        params: dict[str, Any] = {}
        for f, arrays in self.flag_arrays.items():
            params[f] = all(inputs.get(a) is not None for a in arrays)
        for name in self.shape_params:
            a0 = next(iter(self.positions.values()))[0]
            extra = len(inputs[a0].shape) - len(self.op.input_shapes(self.base)[a0])
            params[name] = tuple(int(d) for d in inputs[a0].shape[:extra])
        for name, (arr, axis) in self.positions.items():
            extra = len(inputs[arr].shape) - len(self.op.input_shapes(self.base)[arr])
            params[name] = int(inputs[arr].shape[axis + extra])
        params = self.op.validate(params)
        want = self.op.input_shapes(params)
        got = {k: tuple(v.shape) for k, v in inputs.items() if v is not None}
        if any(got.get(k) is not None and got[k] != want[k] for k in want):
            raise InvalidArgument(f"{self.op.name}: could not read the parameters from the "
                                  f"input shapes {got}")
        return params


def host_dtype(dtype: str) -> np.dtype:
    """The numpy dtype for a spec dtype name (``bfloat16`` through ml_dtypes)."""
    fmt = next((f for f in FORMATS.values() if dtype == f.torch), None)
    return np.dtype(dtype) if fmt is None else fmt.numpy_dtype()
