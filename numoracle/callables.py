"""Where a Python function lives, finding it again, and what it is.

A repro must reach the kernel and the reference again in another process;
the shell takes them as users write them. Three things serve both:

- :func:`load_ref` reads ``module:function`` (importable from the working
  folder, which is put on ``sys.path`` as ``python -m`` does) or
  ``path/to/file.py:function`` (the file loaded under a private module
  name, afresh at each load, as a new process would);
- :func:`locate` says where a function is found again: its module and
  qualified name, and its file (a function of a script run as ``__main__``
  or of a file loaded by path has only the file); None for a lambda, a
  local function or one typed into an interactive session
  (:func:`unlocated_reason` says which);
- :func:`digest` is a content hash (its source, else its code object, and
  the values its closure holds) and :func:`identity` the name a repro is
  filed under: ``module:qualname`` where the function can be found again,
  else its name with the digest (``lambda_1f3a9c0e2b7d``), never a bare
  ``<lambda>`` that unrelated functions share.

Every way of failing to load is an :class:`~numoracle.errors.InvalidArgument`
naming what was asked and what to do.

Examples
--------
>>> load_ref("numpy:matmul").__name__
'matmul'
>>> identity(lambda x: x)[:7]
'lambda_'
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from .errors import InvalidArgument

__all__ = ["load_module", "load_ref", "load_location", "locate", "unlocated_reason",
           "location_text", "digest", "identity", "default_name", "FILE_PREFIX"]

#: the module name a ``.py`` file loaded by path is registered under, before its stem
FILE_PREFIX = "numoracle_src_"


def _cwd_on_path() -> None:
    """Put the working folder on ``sys.path`` (as ``python -m`` and ``python -c``
    do; a console script starts without it)."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def _load_file(ref: str) -> ModuleType:
    path = Path(ref)
    if not path.is_file():
        raise InvalidArgument(f"{ref!r} does not exist here (working folder {os.getcwd()}); "
                              "give its path from here or its full path")
    resolved = path.resolve()
    name = FILE_PREFIX + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, resolved)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 - any failure of the file, told whole
        del sys.modules[name]
        raise InvalidArgument(f"{ref!r} fails while it is loaded ({type(exc).__name__}: "
                              f"{exc}); fix the file so that `python {ref}` runs cleanly") \
            from None
    return mod


def load_module(ref: str) -> ModuleType:
    """The module ``ref`` names: a ``.py`` file (loaded under a private name,
    registered in ``sys.modules``, run afresh each time) or
    a module name importable from the working folder.

    Raises
    ------
    InvalidArgument
        When the file does not exist, or the module cannot be found or fails
        while it is imported (its own error is quoted).
    """
    if ref.endswith(".py"):
        return _load_file(ref)
    _cwd_on_path()
    try:
        return importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not ref.startswith(exc.name) and exc.name != ref:
            raise InvalidArgument(f"module {ref!r} imports {exc.name!r}, which is not "
                                  f"installed ({exc}); install it or give another "
                                  "module") from None
        raise InvalidArgument(f"module {ref!r} cannot be imported from {os.getcwd()} ({exc}); "
                              "give an importable module or the path of a .py file, e.g. "
                              f"{ref.replace('.', '/')}.py") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the module, told whole
        raise InvalidArgument(f"module {ref!r} fails while it is imported "
                              f"({type(exc).__name__}: {exc}); fix it so that it imports "
                              "cleanly") from None


def _attribute(mod: ModuleType, qualname: str, ref: str) -> Any:
    obj: Any = mod
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise InvalidArgument(f"{ref!r}: {getattr(mod, '__name__', mod)} has no "
                                  f"{qualname!r}; name a function defined at its top level")
        obj = getattr(obj, part)
    return obj


def load_ref(ref: str) -> Any:
    """The object ``ref`` names: ``module:name`` or ``path/file.py:name``
    (``name`` may be dotted: ``Class.method``).

    Raises
    ------
    InvalidArgument
        When ``ref`` is not of that form, or the module or name is not there.
    """
    if not isinstance(ref, str) or ":" not in ref or not ref.rpartition(":")[2] \
            or not ref.rpartition(":")[0]:
        raise InvalidArgument(f"{ref!r} must be 'module:name' or 'file.py:name', e.g. "
                              "'mypkg.refs:softmax' or 'refs.py:softmax'")
    where, _, qualname = ref.rpartition(":")
    return _attribute(load_module(where), qualname, ref)


def load_location(loc: Mapping[str, Any]) -> Any:
    """The function a :func:`locate` record names: by its module where that
    imports, else by its file."""
    qual = str(loc.get("function", ""))
    problems = []
    if loc.get("module"):
        try:
            return _attribute(load_module(str(loc["module"])), qual, location_text(loc))
        except InvalidArgument as exc:
            problems.append(str(exc))
    if loc.get("file"):
        try:
            return _attribute(load_module(str(loc["file"])), qual, location_text(loc))
        except InvalidArgument as exc:
            problems.append(str(exc))
    if not problems:
        raise InvalidArgument(f"{dict(loc)!r} names no module or file to find a function in")
    raise InvalidArgument("; ".join(problems))


def location_text(loc: Mapping[str, Any]) -> str:
    """``module:function`` (or ``file.py:function``) of a :func:`locate` record."""
    return f"{loc.get('module') or loc.get('file')}:{loc.get('function')}"


def _function(obj: Any) -> Any:
    """The function behind ``obj``: a bound method's, a partial's, a class's own."""
    obj = getattr(obj, "func", obj)  # functools.partial
    return getattr(obj, "__func__", obj)


def unlocated_reason(obj: Any) -> str | None:
    """Why :func:`locate` cannot find ``obj`` again, or None when it can."""
    fn = _function(obj)
    qual = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if not qual or not module:
        return f"{obj!r} has no module and name to be found by"
    if "<lambda>" in qual:
        return "it is a lambda, which has no name to be found by; define it with def at the " \
               "top level of a module or file"
    if "<locals>" in qual:
        return f"{qual} is defined inside a function; define it at the top level of a " \
               "module or file"
    mod = sys.modules.get(module)
    if mod is None or (module == "__main__" and not getattr(mod, "__file__", None)):
        return f"{qual} was defined in an interactive session, not in a file; put it in a " \
               "module or .py file"
    if _top_name(fn) is None:
        return f"{module}.{qual} is not what {module} holds under that name (redefined, or " \
               "not at its top level)"
    return None


def _top_name(fn: Any) -> str | None:
    """The name under which ``fn``'s module holds it: its qualified name, or for a
    builtin its plain name (``torch.relu``, whose qualname names a hidden class)."""
    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    for name in (getattr(fn, "__qualname__", None), getattr(fn, "__name__", None)):
        if name and mod is not None:
            try:
                found = _attribute(mod, name, name)
            except InvalidArgument:
                continue
            if _function(found) is fn:
                return name
    return None


def locate(obj: Any) -> dict[str, str] | None:
    """Where ``obj`` is found again: ``{"module", "function"}`` for a function of
    an importable module, with ``"file"`` its source file; only ``"file"`` and
    ``"function"`` for one of a script (``__main__``) or a file loaded by path;
    None when it cannot be found (:func:`unlocated_reason`).

    Examples
    --------
    >>> locate(locate)["module"], locate(locate)["function"]
    ('numoracle.callables', 'locate')
    >>> locate(lambda: 0) is None
    True
    """
    if unlocated_reason(obj) is not None:
        return None
    fn = _function(obj)
    module, qual = fn.__module__, _top_name(fn)
    mod = sys.modules[module]
    loc: dict[str, str] = {"function": qual}
    if module != "__main__" and not module.startswith(FILE_PREFIX):
        loc["module"] = module
    file = getattr(mod, "__file__", None)
    if file:
        loc["file"] = str(Path(file).resolve())
    return loc if len(loc) > 1 else None


def _code_digest(code: CodeType, h: Any) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode())


def _plain(value: Any) -> str:
    """A repr without memory addresses (which differ from run to run)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def digest(obj: Any) -> str:
    """A content hash of ``obj`` (12 hex digits): its source where it can be read,
    else its code object; and the values its closure holds. Equal for the
    same function in another process; another for a function whose text or
    captured values differ."""
    fn = _function(obj)
    h = hashlib.sha256()
    code = getattr(fn, "__code__", None)
    try:
        h.update(inspect.getsource(fn).encode())
    except (OSError, TypeError):
        pass
    if code is not None:
        _code_digest(code, h)
    elif not isinstance(fn, type):
        h.update(_plain(type(fn)).encode())
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            h.update(_plain(cell.cell_contents).encode())
        except ValueError:  # an empty cell
            h.update(b"<empty>")
    return h.hexdigest()[:12]


def identity(obj: Any) -> str:
    """The name a function is filed under: ``module:qualname`` (or
    ``file.py:qualname``) where :func:`locate` finds it, else its name with its
    :func:`digest` (``lambda_1f3a9c0e2b7d``, ``kernel_0b5e...`` for a local
    function ``kernel``)."""
    loc = locate(obj)
    if loc is not None:
        return location_text(loc)
    fn = _function(obj)
    base = str(getattr(fn, "__name__", None) or type(fn).__name__)
    base = re.sub(r"\W+", "_", base).strip("_") or "function"
    return f"{base}_{digest(obj)}"


def default_name(obj: Any) -> str:
    """The name a kernel is shown and filed under when none is given: its
    qualified name, or for a lambda its :func:`identity` (``lambda_<digest>``)."""
    fn = _function(obj)
    qual = getattr(fn, "__qualname__", None) or type(fn).__name__
    return identity(obj) if "<lambda>" in qual else str(qual)
