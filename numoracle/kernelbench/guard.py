"""What the candidate's process keeps out of the candidate's reach.

The candidate's code runs in a worker process (:mod:`.sandbox`) beside the
worker's own code, which takes the outputs out. Everything in one Python
process can be replaced by anything else in it, so the worker

1. is hardened before any candidate code runs (:func:`harden`): no core
   files, a cap on the size of files it writes, no network (on the CPU a network
   namespace of its own where the kernel allows an unprivileged one, and in
   any case an audit hook that refuses every socket but a Unix one), its
   working directory a fresh empty folder;
2. pins, before the candidate's file is imported, every function it relies on
   (:class:`Pins`): torch's and NumPy's functions, the ``torch.Tensor``
   methods, the builtins, ctypes' memory functions, the pipe's methods, the
   worker's own functions (with their code objects) and the dispatcher's
   kernels of the ATen ops it calls; after every call into the candidate
   (import, ``ModelNew(...)``, each forward) :meth:`Pins.changed` names any
   that was replaced, and a torch function or dispatch mode, a trace or a
   profile function left installed: each is a failure that names it;
3. takes outputs out through raw memory (:class:`RawMemory`): the bytes
   under an output's data pointer are copied with ``ctypes.memmove`` (host)
   or the CUDA driver's ``cuMemcpyDtoH`` (device) into shared memory the
   judge allocated and reads itself; no ATen op and no Python method of a
   tensor carries an output's values.

An in-process check raises the bar; it is not a wall: code that writes the
worker's memory through ctypes, or edits its running frames, is beyond it.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import mmap
import multiprocessing.connection as mpc
import os
import pickle
import resource
import socket
import sys
import tempfile
from collections.abc import Iterable
from types import FunctionType, ModuleType
from typing import Any

import numpy as np
import torch

__all__ = ["Pins", "RawMemory", "RawMemoryError", "harden", "span_bytes", "FILE_SIZE_LIMIT",
           "PIECE_BYTES"]

#: the largest file the candidate's process may write (a compiled extension fits)
FILE_SIZE_LIMIT = 8 << 30
#: bytes of a device's memory :meth:`RawMemory.same` reads to the host at a time
PIECE_BYTES = 64 << 20
#: ``torch.Tensor`` attributes a candidate must leave as they are
_TENSOR_ATTRS = ("numpy", "cpu", "cuda", "clone", "detach", "contiguous", "float", "double",
                 "to", "copy_", "fill_", "data_ptr", "stride", "storage_offset",
                 "element_size", "shape", "dtype", "device", "size", "dim", "numel",
                 "is_floating_point", "is_contiguous", "__eq__", "__torch_function__",
                 "__torch_dispatch__", "untyped_storage", "tolist", "item", "any", "all",
                 "isnan", "view", "reshape", "transpose", "__new__")
_TORCH_ATTRS = ("Tensor", "empty", "empty_strided", "from_numpy", "allclose", "equal",
                "isnan", "softmax", "no_grad", "zeros", "ones")
_NUMPY_ATTRS = ("ndarray", "frombuffer", "asarray", "ascontiguousarray", "copyto",
                "array_equal")
_BUILTINS = ("type", "isinstance", "issubclass", "len", "zip", "range", "bytes", "getattr",
             "setattr", "vars", "id", "tuple", "list", "dict", "int", "float", "str", "min",
             "max", "sum", "any", "all", "enumerate", "print", "hasattr", "callable",
             "__import__", "memoryview", "bool", "iter", "next", "sorted", "repr")
#: ATen ops the worker dispatches after the candidate's code has run
_ATEN_OPS = ("aten::copy_", "aten::fill_.Scalar", "aten::empty.memory_format",
             "aten::empty_strided", "aten::clone", "aten::_to_copy", "aten::as_strided",
             "aten::transpose.int", "aten::detach", "aten::slice.Tensor", "aten::select.int",
             "aten::contiguous", "aten::_local_scalar_dense", "aten::lift_fresh")
#: dispatch keys whose kernels the check compares (a Meta kernel registered by a lazy
#: import of torch's compiler is not a kernel the worker runs)
_KEYS = ("CPU", "CUDA", "AutogradCPU", "AutogradCUDA", "Autograd", "ADInplaceOrView",
         "BackendSelect", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
         "CompositeExplicitAutogradNonFunctional", "Python", "PythonTLSSnapshot",
         "PreDispatch", "AutogradOther")


def _dispatch_kernels(op: str) -> str:
    """The kernels ``op`` has for the dispatch keys the worker's calls go through."""
    try:
        dump = torch._C._dispatch_dump(op)
    except RuntimeError:
        return ""
    return "\n".join(line for line in dump.splitlines()
                     if line.split(":", 1)[0].strip() in _KEYS)


def _functions(module: ModuleType) -> Iterable[tuple[str, Any]]:
    """Every function of ``module`` and every method of its classes, by name."""
    for name, value in vars(module).items():
        if isinstance(value, FunctionType) and value.__module__ == module.__name__:
            yield name, value
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                if isinstance(member, (FunctionType, staticmethod, classmethod, property)):
                    yield f"{name}.{attr}", member


class Pins:
    """The functions the worker relies on, as they were before the candidate came.

    Parameters
    ----------
    modules : iterable of module
        The worker's own modules: their functions (and code objects) are pinned.
    hooks : bool
        Whether a trace or profile function found installed counts (not in the
        judge's own process, where a test runner or Hypothesis installs them).
    """

    def __init__(self, modules: Iterable[ModuleType], *, hooks: bool = True) -> None:
        self.hooks = hooks
        self._slots: list[tuple[str, Any, str, Any]] = []
        for name in _TENSOR_ATTRS:
            self._pin(f"torch.Tensor.{name}", torch.Tensor, name)
        for name in _TORCH_ATTRS:
            self._pin(f"torch.{name}", torch, name)
        if hasattr(torch, "cuda"):
            self._pin("torch.cuda.synchronize", torch.cuda, "synchronize")
        for name in _NUMPY_ATTRS:
            self._pin(f"numpy.{name}", np, name)
        for name in _BUILTINS:
            self._pin(f"builtins.{name}", builtins, name)
        for name in ("memmove", "memset", "string_at", "addressof", "c_char"):
            self._pin(f"ctypes.{name}", ctypes, name)
        for name in ("send", "recv", "send_bytes", "recv_bytes", "_send_bytes",
                     "_recv_bytes", "poll"):
            self._pin(f"multiprocessing.connection.Connection.{name}", mpc.Connection, name)
        self._pin("pickle.dumps", pickle, "dumps")
        self._code: list[tuple[str, Any, Any]] = []
        for module in modules:
            for name, fn in _functions(module):
                self._pin(f"{module.__name__}.{name}", *_owner(module, name))
                code = getattr(fn, "__code__", None)
                if code is not None:
                    self._code.append((f"{module.__name__}.{name}", fn, code))
        self._aten = {op: _dispatch_kernels(op) for op in _ATEN_OPS}

    def _pin(self, label: str, owner: Any, name: str) -> None:
        self._slots.append((label, owner, name, vars(owner).get(name)))

    def changed(self) -> list[str]:
        """What the candidate replaced or left installed (empty: nothing)."""
        found = [label for label, owner, name, value in self._slots
                 if vars(owner).get(name) is not value]
        found += [label + ".__code__" for label, fn, code in self._code
                  if fn.__code__ is not code]
        found += [f"the dispatcher's kernel of {op}" for op, text in self._aten.items()
                  if _dispatch_kernels(op) != text]
        if torch._C._len_torch_function_stack():
            found.append("a torch function mode left active")
        if torch._C._len_torch_dispatch_stack():
            found.append("a torch dispatch mode left active")
        if self.hooks and sys.gettrace() is not None:
            found.append("a trace function (sys.settrace)")
        if self.hooks and sys.getprofile() is not None:
            found.append("a profile function (sys.setprofile)")
        return found


def _owner(module: ModuleType, dotted: str) -> tuple[Any, str]:
    """The object holding ``dotted`` (``fn`` or ``Class.method``) and the name in it."""
    if "." in dotted:
        cls, attr = dotted.split(".", 1)
        return vars(module)[cls], attr
    return module, dotted


def span_bytes(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes from a strided tensor's first element to one past its last (0 when empty)."""
    if any(n == 0 for n in shape):
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))) * itemsize


class RawMemoryError(RuntimeError):
    """The driver refused a copy or a set: the judge's failure, not the candidate's."""


class RawMemory:
    """Bytes under a pointer, read and written without ATen: ``ctypes`` on the host,
    the CUDA driver's copies and sets on a device.

    Parameters
    ----------
    device : str
        ``"cpu"`` or a CUDA device.
    """

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self._memmove, self._memset = ctypes.memmove, ctypes.memset
        self._memcmp = ctypes.CDLL(None).memcmp
        self._memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self._memcmp.restype = ctypes.c_int
        #: the host buffer a device's bytes are read into, a piece at a time (:meth:`same`)
        self._scratch: Any = None
        if self.cuda:
            lib = ctypes.CDLL("libcuda.so.1")
            self._dtoh = lib.cuMemcpyDtoH_v2
            self._dtoh.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
            self._setd8 = lib.cuMemsetD8_v2
            self._setd8.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]

    def copy_to_host(self, dst: int, src: int, nbytes: int) -> None:
        """``nbytes`` from address ``src`` (host or device) to host address ``dst``.

        On a device the copy is ordered after the legacy default stream's work
        (torch's default stream), not after other streams'."""
        if nbytes <= 0:
            return
        if self.cuda:
            err = self._dtoh(dst, src, nbytes)
            if err:
                raise RawMemoryError(f"cuMemcpyDtoH failed with CUresult {err}")
        else:
            self._memmove(dst, src, nbytes)

    def read(self, src: int, nbytes: int) -> bytes:
        """``nbytes`` from address ``src``, as bytes."""
        buf = ctypes.create_string_buffer(max(nbytes, 1))
        self.copy_to_host(ctypes.addressof(buf), src, nbytes)
        return buf.raw[:nbytes]

    def snapshot(self, src: int, nbytes: int) -> mmap.mmap:
        """``nbytes`` from address ``src`` in a host mapping of their own (one copy, no
        zero-filled buffer first): what :meth:`same` compares against later."""
        held = mmap.mmap(-1, max(nbytes, 1))
        self.copy_to_host(_address(held), src, nbytes)
        return held

    def same(self, src: int, host: int, nbytes: int) -> bool:
        """Whether the ``nbytes`` at address ``src`` (host or device) equal those at host
        address ``host``: compared in place on the host; a device's bytes read a piece
        of :data:`PIECE_BYTES` at a time into one buffer (no copy of the whole)."""
        if nbytes <= 0:
            return True
        if not self.cuda:
            return self._memcmp(src, host, nbytes) == 0
        if self._scratch is None:
            self._scratch = mmap.mmap(-1, PIECE_BYTES)
        scratch = _address(self._scratch)
        for at in range(0, nbytes, PIECE_BYTES):
            n = min(PIECE_BYTES, nbytes - at)
            self.copy_to_host(scratch, src + at, n)
            if self._memcmp(scratch, host + at, n) != 0:
                return False
        return True

    def poison(self, dst: int, nbytes: int) -> None:
        """Fill ``nbytes`` at ``dst`` with 0xFF: NaN in every floating format."""
        if nbytes <= 0:
            return
        if self.cuda:
            err = self._setd8(dst, 0xFF, nbytes)
            if err:
                raise RawMemoryError(f"cuMemsetD8 failed with CUresult {err}")
        else:
            self._memset(dst, 0xFF, nbytes)


def _address(buf: Any) -> int:
    """The host address of a writable buffer (a mapping)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _refuse_network(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: every socket but a Unix one, and name lookups, are refused."""
    if event == "socket.__new__" and len(args) > 1 and args[1] not in (socket.AF_UNIX, -1):
        raise PermissionError("the candidate's process has no network")
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        raise PermissionError("the candidate's process has no network")


def harden() -> list[str]:
    """Limit this process before the candidate's code runs; what was done, as phrases.

    The network namespace is made by the boot code of :mod:`.sandbox` (an
    unprivileged one needs a process with a single thread, before torch's import).
    """
    done = []
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        done.append("no core files")
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        cap = FILE_SIZE_LIMIT if hard == resource.RLIM_INFINITY else min(hard, FILE_SIZE_LIMIT)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))
        done.append(f"files up to {cap >> 30} GiB")
    sys.addaudithook(_refuse_network)
    done.append("sockets other than Unix ones refused")
    os.chdir(tempfile.mkdtemp(prefix="numoracle-candidate-"))
    done.append("working directory a fresh empty folder")
    return done
