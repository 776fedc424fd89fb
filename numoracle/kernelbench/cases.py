"""Cases of a KernelBench problem: sizes, value families, layouts, parameters.

A :class:`KBCase` is plain data: the problem's size knobs it changes, the value
family of its inputs, each input's layout, whether the parameters are the
seeded defaults or drawn, and a seed. The *official* case changes nothing: the
benchmark's shapes, ``get_inputs()``'s distribution (``torch.rand``: uniform
in [0, 1)), contiguous inputs, parameters as ``Model(...)`` initialises them.

Other sizes come from the size knobs (:meth:`Problem.knobs`): module constants
of at least 4 (dimension indices, kernel sizes and strides are smaller and
stay). A size is valid when the model runs on it: checked on the ``meta``
device, without arithmetic. :func:`reduced_sizes` finds small valid sizes
for problems whose official instance is too large to evaluate in float64.

Value families act on the inputs a tensor factory made directly (``rand``,
``randn``); an input ``get_inputs()`` derived from them (a triangular or
symmetric matrix, probabilities) keeps its official values, since a candidate
may rely on that structure:

``official``  ``get_inputs()`` as it is
``signed``    ``2x − 1`` on nonzero elements: both signs (ReLU's identity fails)
``large``     ``signed`` times 2^12
``tiny``      ``signed`` times 2^-12

Drawn parameters replace every floating-point parameter or buffer that
initialises to one value (a norm's weight of ones, a bias or running mean of
zeros, a running variance of ones) by values drawn around it, so that a
kernel that ignores the affine weights or the running statistics is seen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import InvalidArgument
from .problem import Problem

__all__ = ["KBCase", "FAMILIES", "PARAMS", "varied_knobs", "valid_sizes", "reduced_sizes",
           "layouts_for", "case_inputs", "case_tensors", "case_state",
           "host_arrays", "float64_bytes"]

FAMILIES = ("official", "signed", "large", "tiny")
PARAMS = ("default", "drawn")
_SCALE = {"official": 1.0, "signed": 1.0, "large": 2.0 ** 12, "tiny": 2.0 ** -12}
_FACTORIES_WITH_FAMILIES = ("rand", "randn", "rand_like", "randn_like", "empty")


@dataclass(frozen=True)
class KBCase:
    """One case of a problem (see the module docstring)."""

    sizes: tuple[tuple[str, Any], ...] = ()
    family: str = "official"
    layouts: tuple[str, ...] = ()
    params: str = "default"
    seed: int = 0
    #: the output rows judged, where the instance is sampled (:mod:`.sampling`); () all
    rows: tuple[int, ...] = ()
    #: the output rows judged whole in pieces (:mod:`.pieces`): ``(first, stop, rows
    #: per piece)``, rows ``first`` to ``stop - 1``; () none
    span: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.span and (len(self.span) != 3 or not 0 <= self.span[0] < self.span[1]
                          or self.span[2] < 1):
            raise InvalidArgument(f"span={self.span!r} is not (first row, stop, rows per "
                                  "piece) with 0 <= first < stop and at least 1 per piece")
        if self.family not in FAMILIES:
            raise InvalidArgument(f"family={self.family!r} is unknown; use one of {FAMILIES}")
        if self.params not in PARAMS:
            raise InvalidArgument(f"params={self.params!r} is unknown; use one of {PARAMS}")

    @property
    def official(self) -> bool:
        """Whether this is the benchmark's own instance (sizes, values, layouts, parameters)."""
        return (not self.sizes and self.family == "official" and self.params == "default"
                and all(lay == "C" for lay in self.layouts))

    def overrides(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**(base or {}), **dict(self.sizes)}

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes) or "official sizes"
        lays = "".join(self.layouts) or "C"
        rows = f"; rows {', '.join(map(str, self.rows))} judged" if self.rows else ""
        if self.span:
            first, stop, per = self.span
            count = -(-(stop - first) // per)
            rows = (f"; rows {first} to {stop - 1} judged, in {count} piece"
                    f"{'s' if count > 1 else ''} of {per} rows")
        return (f"{sizes}; values {self.family}; layouts {lays}; parameters {self.params}; "
                f"seed {self.seed}{rows}")

    def to_json(self) -> str:
        return json.dumps({"sizes": dict(self.sizes), "family": self.family,
                           "layouts": "".join(self.layouts), "params": self.params,
                           "seed": self.seed, **({"rows": list(self.rows)} if self.rows else {}),
                           **({"span": list(self.span)} if self.span else {})},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> KBCase:
        """The case :meth:`to_json` wrote (as the replay command gives it)."""
        try:
            d = json.loads(text)
            return cls(sizes=tuple(sorted(d.get("sizes", {}).items())),
                       family=d.get("family", "official"),
                       layouts=tuple(d.get("layouts", "")), params=d.get("params", "default"),
                       seed=int(d.get("seed", 0)), rows=tuple(int(i) for i in d.get("rows", ())),
                       span=tuple(int(i) for i in d.get("span", ())))
        except (ValueError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"case={text!r} is not a case as the replay command gives "
                                  f"it ({exc}); copy it from the verdict") from None


def varied_knobs(problem: Problem) -> dict[str, int]:
    """The size knobs drawn cases change: int constants of at least 4."""
    return {k: v for k, v in problem.knobs.items() if v >= 4}


def valid_sizes(problem: Problem, sizes: Mapping[str, Any]) -> bool:
    """Whether ``Model`` builds and runs its forward pass at ``sizes`` (on ``meta``)."""
    try:
        specs = problem.input_specs(sizes)
        if any(s.dtype is None for s in specs):
            return False
        with torch.device("meta"):
            model = problem.model(sizes)
            args = [torch.empty(s.shape, dtype=s.dtype) for s in specs]
            model(*args)
    except Exception:  # noqa: BLE001 - any failure means: not a size this problem takes
        return False
    return True


class _Count(TorchDispatchMode):
    """Counts the elements of every tensor an ATen op makes."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.elements += t.numel()
        return out


def float64_bytes(problem: Problem, sizes: Mapping[str, Any]) -> int:
    """Bytes of the inputs, the parameters and every intermediate result of the
    forward pass at ``sizes``, in float64 (found on the ``meta`` device): a floor
    on the oracle's memory, which holds radii beside each value."""
    specs = problem.input_specs(sizes)
    n = sum(s.elements() for s in specs if s.floating)
    args = [torch.empty(s.shape, dtype=s.dtype, device="meta") if s.dtype is not None
            else value for s, value in zip(specs, problem.meta_inputs(sizes), strict=False)]
    with torch.device("meta"):
        model = problem.model(sizes)
        n += sum(t.numel() for t in model.state_dict().values() if t.is_floating_point())
        count = _Count()
        try:
            with count:
                model(*args)
        except Exception:  # noqa: BLE001 - sizes the model does not take: counted as huge
            return 1 << 62
    return 8 * (n + count.elements)


def reduced_sizes(problem: Problem, base: Mapping[str, Any] | None = None,
                  *, most: int = 1 << 16) -> dict[str, int] | None:
    """Valid sizes whose float64 floor (:func:`float64_bytes`) is at most ``most``
    elements: the largest varied knob halved, again and again, while the floor is
    above it (halving keeps the official sizes' divisibility by powers of two).
    None when the model does not run even at its official sizes."""
    base = dict(base or {})
    if not valid_sizes(problem, base):
        return None
    knobs = varied_knobs(problem)
    sizes: dict[str, int] = {}
    while float64_bytes(problem, {**base, **sizes}) > 8 * most:
        current = {k: sizes.get(k, v) for k, v in knobs.items()}
        for name, value in sorted(current.items(), key=lambda kv: -kv[1]):
            trial = {**sizes, name: value // 2}
            if value >= 2 and valid_sizes(problem, {**base, **trial}):
                sizes = trial
                break
        else:
            break
    return sizes


def _family(x: torch.Tensor, family: str) -> torch.Tensor:
    """``x`` in value family ``family``, by torch where ``x`` lies (the same bits on
    any device: a doubling, a subtraction and a power-of-two scaling, each rounded)."""
    if family == "official":
        return x
    signed = torch.where(x != 0, 2.0 * x - 1.0, 0.0)
    return (signed * _SCALE[family]).to(x.dtype)


def _round(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """``x`` rounded to ``dtype`` and back to a NumPy float32/float64 array (exact)."""
    return host_arrays([torch.from_numpy(np.ascontiguousarray(x)).to(dtype)])[0]


def host_arrays(values: Sequence[Any]) -> list[Any]:
    """Tensors' values as host arrays (bfloat16 and float16 as float32, exactly); what
    is not a tensor as it is."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu()
            v = (v.float() if v.dtype in (torch.bfloat16, torch.float16) else v).numpy()
        out.append(v)
    return out


def case_tensors(problem: Problem, case: KBCase, base: Mapping[str, Any], *, draw: int,
                 dtype: torch.dtype, device: str = "cpu") -> list[Any]:
    """The forward pass's arguments of ``case`` (draw ``draw``: the first and the
    second call of a case use two), drawn by ``device``'s generator and left there
    (:meth:`Problem.inputs`), floating ones in value family ``case.family`` and
    stored in ``dtype``."""
    sizes = case.overrides(base)
    specs = problem.input_specs(sizes)
    made = problem.inputs(sizes, seed=2 * case.seed + draw, device=device, keep=True)
    out: list[Any] = []
    for spec, value in zip(specs, made, strict=False):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            if spec.factory in _FACTORIES_WITH_FAMILIES:
                value = _family(value, case.family)
            value = value.to(dtype)
        out.append(value)
    return out


def case_inputs(problem: Problem, case: KBCase, base: Mapping[str, Any], *, draw: int,
                dtype: torch.dtype, device: str = "cpu") -> list[Any]:
    """:func:`case_tensors` as host arrays (floating ones in ``dtype``'s values, as
    float32 where ``dtype`` is narrower)."""
    return host_arrays(case_tensors(problem, case, base, draw=draw, dtype=dtype,
                                    device=device))


def case_state(problem: Problem, case: KBCase, base: Mapping[str, Any], *,
               dtype: torch.dtype) -> dict[str, np.ndarray]:
    """The reference's ``state_dict`` for ``case``: seeded defaults, or with every
    constant-initialised floating tensor drawn around its constant; in ``dtype``'s
    values."""
    sizes = case.overrides(base)
    model = problem.model(sizes, seed=case.seed)
    rng = np.random.default_rng(case.seed + 1)
    state: dict[str, np.ndarray] = {}
    for name, t in model.state_dict().items():
        arr = t.detach().numpy().copy()
        if t.is_floating_point():
            if case.params == "drawn" and arr.size and np.all(arr == arr.flat[0]):
                c = float(arr.flat[0])
                spread = rng.uniform(-0.5, 0.5, arr.shape)
                arr = (c + spread * max(abs(c), 1.0)).astype(arr.dtype)
                if "var" in name:  # a variance stays positive
                    arr = np.abs(arr) + np.float32(0.25)
            arr = _round(arr, dtype)
        state[name] = arr
    return state


def layouts_for(specs: Sequence[Any]) -> list[tuple[str, ...]]:
    """The layouts each input may take: ``T`` for two axes or more, ``S`` for one or more."""
    out: list[tuple[str, ...]] = []
    for s in specs:
        if s.dtype is None or not s.shape:
            out.append(("C",))
        elif len(s.shape) >= 2:
            out.append(("C", "T", "S"))
        else:
            out.append(("C", "S"))
    return out
