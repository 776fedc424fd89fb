"""KernelBench's file format: a problem (``Model``, ``get_inputs``, ``get_init_inputs``).

A problem file defines the reference module ``Model``, ``get_inputs()`` (the
forward pass's arguments, drawn with ``torch.rand`` at one shape) and
``get_init_inputs()`` (the arguments of ``Model(...)``). Both functions read
module-level integer constants (``batch_size = 16``, ``dim = 16384``): those
constants are the problem's *size knobs*, and setting them to other values
before calling the functions gives the same problem at another size, with the
init arguments and the input shapes kept consistent.

Loading never allocates the official inputs: :meth:`Problem.input_specs` calls
``get_inputs()`` with every tensor factory redirected to the ``meta`` device,
recording which factory made each tensor, its shape and dtype. A file that does
not parse, lacks one of the three names, or whose functions raise is refused
with one :class:`BadFile` sentence.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..errors import InvalidArgument

__all__ = ["BadFile", "Problem", "InputSpec", "load_problem", "load_module", "FACTORIES"]

#: tensor factories ``get_inputs`` may call; redirected to ``meta`` when only shapes are wanted
FACTORIES = ("rand", "randn", "randint", "zeros", "ones", "empty", "full", "rand_like",
             "randn_like", "randint_like", "zeros_like", "ones_like", "full_like", "arange",
             "tensor", "randperm", "eye", "linspace")

_counter = itertools.count()


class BadFile(InvalidArgument):
    """A problem or candidate file that cannot be used as KernelBench's format says."""


def load_module(path: str | Path, *, needs: Sequence[str], what: str) -> ModuleType:
    """Execute the Python file ``path`` as a fresh module that must define ``needs``.

    Each call makes a new module (a unique name), so two files, or one file
    loaded twice with other size knobs, never share state.

    Raises
    ------
    BadFile
        When the file is missing, does not parse, raises while it runs, or
        lacks a name in ``needs``; the message is one sentence naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise BadFile(f"{what} file {str(path)!r} does not exist; give the path of a .py file")
    source = path.read_text()
    try:
        ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise BadFile(f"{what} file {path.name}: syntax error at line {exc.lineno}: "
                      f"{exc.msg}") from None
    name = f"_numoracle_kernelbench_{path.stem.replace('-', '_')}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BadFile(f"{what} file {path.name} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and torch.compile look it up there
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of the file is reported as one line
        del sys.modules[name]
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise BadFile(f"{what} file {path.name} raised {type(exc).__name__} while loading: "
                      f"{first}") from None
    missing = [n for n in needs if not hasattr(module, n)]
    if missing:
        raise BadFile(f"{what} file {path.name} does not define {', '.join(missing)}; "
                      f"KernelBench's format needs {', '.join(needs)}")
    return module


@dataclass(frozen=True)
class InputSpec:
    """One argument of the forward pass as ``get_inputs()`` makes it.

    ``factory`` is the torch function that made the tensor (``"rand"``,
    ``"randint"``; ``"derived"`` when it came out of another op, as
    ``torch.triu(torch.rand(...))`` does), or ``"value"`` for a non-tensor
    argument (kept as it is).
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype | None
    factory: str

    @property
    def floating(self) -> bool:
        return self.dtype is not None and self.dtype.is_floating_point

    def elements(self) -> int:
        return int(np.prod(self.shape)) if self.dtype is not None else 0


class _MetaFactories(TorchFunctionMode):
    """Redirects tensor factories to ``meta`` and records the factory of each tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, str] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name in FACTORIES:
            kwargs["device"] = "meta"
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            self.made[id(out)] = name if name in FACTORIES else "derived"
        return out


def _assignments(source: str) -> list[tuple[tuple[str, ...], ast.expr, frozenset[str]]]:
    """The module's top-level assignments, in order: (targets, value, names it reads)."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = tuple(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        reads = frozenset(n.id for n in ast.walk(value) if isinstance(n, ast.Name))
        out.append((names, value, reads))
    return out


@contextmanager
def _knobs(module: ModuleType, sizes: Mapping[str, Any],
           derived: Sequence[tuple[tuple[str, ...], ast.expr, frozenset[str]]] = ()
           ) -> Iterator[None]:
    """Within the block the module's constants named in ``sizes`` take its values, and
    every top-level assignment that reads one of them (``input_shape = (num_classes,)``)
    is evaluated again from the new values."""
    changed = set(sizes)
    old = {k: getattr(module, k) for k in sizes}
    try:
        for k, v in sizes.items():
            setattr(module, k, v)
        for names, value, reads in derived:
            if reads & changed and not set(names) & set(sizes):
                for n in names:
                    old.setdefault(n, getattr(module, n, None))
                code = compile(ast.Expression(value), "<derived>", "eval")
                result = eval(code, vars(module))  # noqa: S307 - the problem's own expression
                if len(names) == 1:
                    setattr(module, names[0], result)
                    changed.add(names[0])
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


@dataclass
class Problem:
    """A loaded problem file.

    Attributes
    ----------
    path : Path
        The file.
    module : ModuleType
        It, executed.
    knobs : dict of str to int
        The module-level integer constants and their official values.
    input_names : tuple of str
        The forward pass's parameter names (the inputs, by position).
    """

    path: Path
    module: ModuleType
    knobs: dict[str, int] = field(default_factory=dict)
    input_names: tuple[str, ...] = ()
    #: the module's top-level assignments (re-evaluated where they read a changed knob)
    derived: list[tuple[tuple[str, ...], ast.expr, frozenset[str]]] = field(
        default_factory=list)

    def at(self, sizes: Mapping[str, Any] | None = None) -> Any:
        """A context in which the module's knobs take ``sizes`` and what is derived from
        them follows (a ``forward`` that reads a module constant sees the case's)."""
        return _knobs(self.module, sizes or {}, self.derived)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def model_class(self) -> type[torch.nn.Module]:
        return self.module.Model

    def dropout_off(self) -> dict[str, float]:
        """Overrides that switch the problem's dropout off: each module-level
        float constant whose name says dropout (``dropout_p = 0.2``) set to 0.

        A model left in train mode (as KernelBench runs it) with live dropout is
        not a function of its inputs; with these overrides both the reference
        and the candidate are built with ``p = 0``, and a verdict says so.
        """
        return {k: 0.0 for k, v in vars(self.module).items()
                if "drop" in k.lower() and isinstance(v, float) and v != 0.0}

    def init_args(self, sizes: Mapping[str, Any] | None = None) -> list[Any]:
        """``get_init_inputs()`` with the size knobs at ``sizes`` (official where left out)."""
        with self.at(sizes):
            return list(self._call("get_init_inputs"))

    def inputs(self, sizes: Mapping[str, Any] | None = None, *, seed: int = 0,
               device: str = "cpu", keep: bool = False) -> list[Any]:
        """``get_inputs()`` with torch's generator seeded by ``seed``: on the CPU, or
        with ``device`` (a GPU) the default device, its tensors made there by that
        device's generator (another stream of values than the CPU's; a GPU's is many
        times faster at billions of elements) and brought to the host (``keep``: left
        on ``device``)."""
        if device == "cpu":
            with self.at(sizes), torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(seed)
                return list(self._call("get_inputs"))
        where = torch.device(device)
        index = where.index if where.index is not None else torch.cuda.current_device()
        with self.at(sizes), torch.random.fork_rng(devices=[index]), where:
            torch.default_generator.manual_seed(seed)
            torch.cuda.default_generators[index].manual_seed(seed)
            made = list(self._call("get_inputs"))
        if keep:
            return made
        return [m.cpu() if isinstance(m, torch.Tensor) else m for m in made]

    def meta_inputs(self, sizes: Mapping[str, Any] | None = None) -> list[Any]:
        """``get_inputs()`` with its tensors on the ``meta`` device (nothing allocated),
        its other values (a Python scalar) as they are."""
        with self.at(sizes), _MetaFactories():
            return list(self._call("get_inputs"))

    def input_specs(self, sizes: Mapping[str, Any] | None = None) -> tuple[InputSpec, ...]:
        """Shapes, dtypes and factories of the inputs, without allocating them."""
        mode = _MetaFactories()
        with self.at(sizes), mode:
            made = list(self._call("get_inputs"))
        if len(made) != len(self.input_names) and not self._var_positional():
            raise BadFile(f"problem file {self.path.name}: get_inputs() returns {len(made)} "
                          f"values but Model.forward takes {len(self.input_names)} "
                          f"({', '.join(self.input_names)})")
        names = list(self.input_names) + [f"input{i}" for i in range(len(self.input_names),
                                                                     len(made))]
        specs = []
        for name, value in zip(names, made, strict=False):
            if isinstance(value, torch.Tensor):
                specs.append(InputSpec(name, tuple(value.shape), value.dtype,
                                       mode.made.get(id(value), "derived")))
            else:
                specs.append(InputSpec(name, (), None, "value"))
        return tuple(specs)

    def model(self, sizes: Mapping[str, Any] | None = None, *, seed: int = 0,
              init_args: Sequence[Any] | None = None) -> torch.nn.Module:
        """``Model(*init_args)`` on the CPU, its parameters from torch's generator at ``seed``."""
        args = self.init_args(sizes) if init_args is None else list(init_args)
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            try:
                return self.model_class(*args)
            except Exception as exc:  # noqa: BLE001 - a problem that cannot be built is refused
                raise BadFile(f"problem file {self.path.name}: Model({_short(args)}) raised "
                              f"{type(exc).__name__}: {exc}") from None

    def _call(self, fn: str) -> Any:
        try:
            out = getattr(self.module, fn)()
        except Exception as exc:  # noqa: BLE001 - a problem whose functions raise is refused
            raise BadFile(f"problem file {self.path.name}: {fn}() raised "
                          f"{type(exc).__name__}: {exc}") from None
        if not isinstance(out, (list, tuple)):
            raise BadFile(f"problem file {self.path.name}: {fn}() returned "
                          f"{type(out).__name__}; KernelBench's format needs a list")
        return out

    def _var_positional(self) -> bool:
        sig = inspect.signature(self.model_class.forward)
        return any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())


def _short(args: Sequence[Any]) -> str:
    text = ", ".join(repr(a) for a in args)
    return text if len(text) < 80 else text[:77] + "..."


def _knob_values(module: ModuleType, derived: Sequence[tuple[tuple[str, ...], ast.expr,
                                                            frozenset[str]]]
                 ) -> dict[str, int]:
    """The module-level int constants a problem's functions may read (bools excluded),
    without those computed from another module-level name (they are re-derived)."""
    ints = {k: int(v) for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)}
    computed = {n for names, _, reads in derived for n in names if reads & set(vars(module))}
    return {k: v for k, v in ints.items() if k not in computed}


def _forward_names(model: type[torch.nn.Module], path: Path) -> tuple[str, ...]:
    forward: Callable[..., Any] | None = getattr(model, "forward", None)
    if forward is None or forward is torch.nn.Module.forward:
        raise BadFile(f"problem file {path.name}: Model defines no forward method")
    params = list(inspect.signature(forward).parameters.values())[1:]  # self
    return tuple(p.name for p in params
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def load_problem(path: str | Path) -> Problem:
    """Load a KernelBench problem file.

    Raises
    ------
    BadFile
        When the file does not parse, raises, lacks ``Model``, ``get_inputs`` or
        ``get_init_inputs``, or its ``Model`` is not an ``nn.Module`` with a
        ``forward``.
    """
    module = load_module(path, needs=("Model", "get_inputs", "get_init_inputs"),
                         what="problem")
    path = Path(path)
    model = module.Model
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise BadFile(f"problem file {path.name}: Model is {type(model).__name__}, not a "
                      "torch.nn.Module subclass")
    derived = _assignments(path.read_text())
    return Problem(path=path, module=module, knobs=_knob_values(module, derived),
                   input_names=_forward_names(model, path), derived=derived)
