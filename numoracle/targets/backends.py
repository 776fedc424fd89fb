"""Array backends: moving exact host values to a target's device and back.

A backend knows one array library on one device (``numpy``, ``torch-cpu``,
``torch-cuda``, ``cupy``). It makes a backend array of the storage dtype from
float64 host values, **bit-exactly** (the values are already representable in
the storage format; anything else is refused), laid out as the case asks:

``C``
    row-major contiguous;
``F``
    column-major (all axes reversed in memory);
``T``
    a transposed *view* of a contiguous array of the transposed shape (last
    two axes; 1-D arrays are as ``C``);
``S``
    every other element of a buffer whose last axis is twice as long. The gaps
    hold NaN, so a kernel that ignores the strides reads NaN and fails loudly.

The layout is built on the host in the storage dtype, the dense buffer is
uploaded as it is, and the view is taken on the device, so that strided
layouts survive the transfer (``tensor.to("cuda")`` would compact them).

Examples
--------
>>> import numpy as np
>>> be = get_backend("numpy")
>>> a = be.to_device(np.array([[1.0, 2.0], [3.0, 4.0]]), "fp32", "F")
>>> a.flags.f_contiguous, a.dtype.name
(True, 'float32')
>>> be.to_host(a).tolist()
[[1.0, 2.0], [3.0, 4.0]]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from ..oracle.formats import Format, get_format
from ..oracle.ops.base import INTEGER_DTYPES
from .target import BACKENDS, LAYOUTS

__all__ = ["Backend", "NumpyBackend", "TorchBackend", "CupyBackend", "get_backend"]

#: storage formats an array can hold (tf32 is a compute format only)
STORAGE_FORMATS = ("fp64", "fp32", "fp16", "bf16")


def _storage(storage: Format | str) -> Format:
    fmt = get_format(storage)
    if fmt.name not in STORAGE_FORMATS:
        raise InvalidArgument(
            f"storage={fmt.name!r} is not a storage format: arrays hold one of "
            f"{STORAGE_FORMATS}; for TF32 store fp32 and claim the 'tf32' precision model"
        )
    return fmt


def _numpy_dtype(fmt: Format) -> np.dtype:
    return fmt.numpy_dtype()


def _host_cast(host: np.ndarray, fmt: Format) -> np.ndarray:
    """``host`` in the storage dtype, refusing any value the cast would change."""
    host = np.asarray(host, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = host.astype(_numpy_dtype(fmt))
    changed = ~((cast.astype(np.float64) == host) | np.isnan(host))
    if np.any(changed):
        first = float(host[changed].flat[0])
        raise InvalidArgument(
            f"{int(np.count_nonzero(changed))} host value(s), e.g. {first!r}, are not "
            f"representable in {fmt.name}: a target's inputs must be exact; quantize "
            f"them first (numoracle.oracle.formats.quantize(x, {fmt.name!r}))"
        )
    return cast


def _layout_plan(cast: np.ndarray, layout: str, fill: Any = np.nan
                 ) -> tuple[np.ndarray, tuple[int, ...] | None, bool]:
    """The dense host buffer to upload, the axis permutation to view it through
    (None: none) and whether to take every other element of the last axis
    (the gaps hold ``fill``)."""
    if layout not in LAYOUTS:
        raise InvalidArgument(f"{layout=} is unknown; use one of {LAYOUTS}")
    nd = cast.ndim
    if layout == "C" or nd == 0 or (layout == "T" and nd < 2):
        # (ascontiguousarray makes a 0-d array 1-d: the shape is kept)
        return np.ascontiguousarray(cast).reshape(cast.shape), None, False
    if layout in ("F", "T"):
        if layout == "F":
            axes = tuple(range(nd - 1, -1, -1))
        else:
            axes = tuple(range(nd - 2)) + (nd - 1, nd - 2)
        # both permutations are their own inverse
        return np.ascontiguousarray(cast.transpose(axes)), axes, False
    buf = np.full(cast.shape[:-1] + (2 * cast.shape[-1],), fill, dtype=cast.dtype)
    buf[..., ::2] = cast
    return buf, None, True


class Backend(ABC):
    """One array library on one device.

    Subclasses give the library's dtypes, upload, download and axis
    permutation; the layouts and exactness checks are shared.
    """

    name: str = ""

    @abstractmethod
    def available(self) -> str | None:
        """None when usable here, else why not (``"no CUDA device"``)."""

    @abstractmethod
    def dtype(self, storage: Format | str) -> Any:
        """The library's dtype for a storage format (InvalidArgument if none)."""

    @abstractmethod
    def _upload(self, dense: np.ndarray) -> Any:
        """A backend array with the same bits as the C-contiguous host ``dense``."""

    @abstractmethod
    def _permute(self, arr: Any, axes: Sequence[int]) -> Any:
        """A view of ``arr`` with its axes permuted."""

    @abstractmethod
    def _download(self, arr: Any) -> np.ndarray:
        """``arr`` as a float64 host array (exact: every storage format widens)."""

    @abstractmethod
    def _is_native(self, arr: Any) -> str | None:
        """None when ``arr`` is an array of this library on this device, else what it is."""

    @abstractmethod
    def _full_nan(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A new array full of NaN."""

    def synchronize(self) -> None:  # noqa: B027 - host backends have nothing to wait for
        """Wait for work queued on the device (a no-op on the host)."""

    def to_device(self, host: np.ndarray, storage: Format | str, layout: str = "C") -> Any:
        """The float64 ``host`` values as a backend array of the storage dtype.

        Parameters
        ----------
        host : numpy.ndarray
            Values, each exactly representable in ``storage``.
        storage : Format or str
            ``"fp64"``, ``"fp32"``, ``"fp16"`` or ``"bf16"``.
        layout : str
            One of :data:`numoracle.targets.target.LAYOUTS`.
        """
        fmt = _storage(storage)
        self.dtype(fmt)  # refuse formats this library has no dtype for, before any work
        return self._laid_out(*_layout_plan(_host_cast(host, fmt), layout))

    def to_device_integers(self, host: np.ndarray, dtype: str = "int64",
                           layout: str = "C") -> Any:
        """Integer or boolean host values (class labels, indices, masks) as a
        backend array of ``dtype`` (``"int64"`` or ``"bool"``), laid out as
        :meth:`to_device` lays out floating-point ones; the gaps of the strided
        layout hold the most negative int64 (an index out of every range) or
        ``True``, so a kernel that ignores the strides fails loudly.

        Raises
        ------
        InvalidArgument
            For another dtype, or a value the cast would change.
        """
        if dtype not in INTEGER_DTYPES:
            raise InvalidArgument(f"{dtype=} must be one of {INTEGER_DTYPES}")
        host = np.asarray(host)
        cast = host.astype(dtype)
        if host.dtype != cast.dtype and not np.array_equal(cast.astype(np.float64),
                                                           host.astype(np.float64)):
            raise InvalidArgument(f"host values of dtype {host.dtype} are not all {dtype}; "
                                  "give integer inputs as integers")
        fill = True if dtype == "bool" else np.iinfo(np.int64).min
        return self._laid_out(*_layout_plan(cast, layout, fill))

    def _laid_out(self, dense: np.ndarray, axes: Sequence[int] | None, strided: bool) -> Any:
        """The dense host buffer uploaded, then viewed in its layout on the device
        (axes permuted, every other element of a strided one)."""
        arr = self._upload(dense)
        if axes is not None:
            arr = self._permute(arr, axes)
        if strided:
            arr = arr[..., ::2]
        return arr

    def to_host(self, arr: Any) -> np.ndarray:
        """``arr`` as a new float64 numpy array (waits for the device first)."""
        self.synchronize()
        return self._download(arr)

    def poisoned(self, shape: Sequence[int], storage: Format | str) -> Any:
        """A new C-contiguous array of ``shape`` full of NaN, for kernels that write
        into preallocated outputs: an element left unwritten stays NaN and fails."""
        return self._full_nan(tuple(int(d) for d in shape), self.dtype(_storage(storage)))

    def check_output(
        self,
        arr: Any,
        *,
        storage: Format | str | None = None,
        shape: Sequence[int] | None = None,
    ) -> str | None:
        """None when ``arr`` is a usable output of a target on this backend, else
        what is wrong with it (wrong library, device, dtype or shape)."""
        wrong = self._is_native(arr)
        if wrong is not None:
            return f"expected a {self.name} array, got {wrong}"
        if storage is not None:
            want = self.dtype(_storage(storage))
            if arr.dtype != want:
                return f"expected dtype {want} ({get_format(storage).name}), got {arr.dtype}"
        if shape is not None and tuple(arr.shape) != tuple(shape):
            return f"expected shape {tuple(shape)}, got {tuple(arr.shape)}"
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _describe(arr: Any) -> str:
    kind = f"{type(arr).__module__}.{type(arr).__qualname__}"
    dev = getattr(arr, "device", None)
    return f"{kind} on {dev}" if dev is not None else kind


class NumpyBackend(Backend):
    """NumPy arrays on the host; bf16 through ``ml_dtypes.bfloat16``."""

    name = "numpy"

    def available(self) -> str | None:
        return None

    def dtype(self, storage: Format | str) -> np.dtype:
        fmt = _storage(storage)
        if fmt.name == "bf16":
            try:
                import ml_dtypes  # noqa: F401
            except ImportError:
                raise InvalidArgument(
                    "storage='bf16' on numpy needs ml_dtypes: pip install ml_dtypes"
                ) from None
        return _numpy_dtype(fmt)

    def _upload(self, dense: np.ndarray) -> np.ndarray:
        return dense

    def _permute(self, arr: np.ndarray, axes: Sequence[int]) -> np.ndarray:
        return arr.transpose(axes)

    def _download(self, arr: Any) -> np.ndarray:
        return np.array(arr, dtype=np.float64)

    def _is_native(self, arr: Any) -> str | None:
        return None if isinstance(arr, np.ndarray) else _describe(arr)

    def _full_nan(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.full(shape, np.nan, dtype=dtype)


class TorchBackend(Backend):
    """torch tensors on the CPU or on the current CUDA device."""

    def __init__(self, device: str) -> None:
        if device not in ("cpu", "cuda"):
            raise InvalidArgument(f"{device=} must be 'cpu' or 'cuda'")
        self.device = device
        self.name = f"torch-{device}"

    def available(self) -> str | None:
        try:
            import torch
        except ImportError:
            return "torch is not installed"
        if self.device == "cuda" and not torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False)"
        return None

    def dtype(self, storage: Format | str) -> Any:
        import torch

        return _storage(storage).torch_dtype()

    def _upload(self, dense: np.ndarray) -> Any:
        import torch

        if dense.dtype == _numpy_dtype(get_format("bf16")):
            # torch cannot read ml_dtypes arrays: move the bits, then reinterpret them
            t = torch.from_numpy(dense.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(dense)
        return t.to(self.device, copy=True)

    def _permute(self, arr: Any, axes: Sequence[int]) -> Any:
        return arr.permute(*axes)

    def _download(self, arr: Any) -> np.ndarray:
        import torch

        t = arr.detach().to("cpu")
        if t.dtype == torch.bfloat16:
            t = t.float()  # exact: bf16 widens to fp32
        return t.numpy().astype(np.float64)

    def _is_native(self, arr: Any) -> str | None:
        import torch

        if not isinstance(arr, torch.Tensor):
            return _describe(arr)
        return None if arr.device.type == self.device else f"a torch tensor on {arr.device}"

    def _full_nan(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        return torch.full(shape, float("nan"), dtype=dtype, device=self.device)

    def synchronize(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()


class CupyBackend(Backend):
    """CuPy arrays on the current CUDA device (no bfloat16: use torch-cuda)."""

    name = "cupy"

    def available(self) -> str | None:
        try:
            import cupy
        except ImportError:
            return "cupy is not installed"
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - no driver, no device, broken install: all mean "not here"
            return f"no CUDA device ({type(exc).__name__}: {exc})"
        return None if count > 0 else "no CUDA device"

    def dtype(self, storage: Format | str) -> np.dtype:
        fmt = _storage(storage)
        if fmt.name == "bf16":
            raise InvalidArgument(
                "storage='bf16' is not supported on cupy, which has no bfloat16 dtype; "
                "use the torch-cuda backend for bf16"
            )
        return _numpy_dtype(fmt)

    def _upload(self, dense: np.ndarray) -> Any:
        import cupy

        return cupy.asarray(dense)

    def _permute(self, arr: Any, axes: Sequence[int]) -> Any:
        return arr.transpose(axes)

    def _download(self, arr: Any) -> np.ndarray:
        import cupy

        return cupy.asnumpy(arr).astype(np.float64)

    def _is_native(self, arr: Any) -> str | None:
        import cupy

        return None if isinstance(arr, cupy.ndarray) else _describe(arr)

    def _full_nan(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import cupy

        return cupy.full(shape, np.nan, dtype=dtype)

    def synchronize(self) -> None:
        import cupy

        cupy.cuda.get_current_stream().synchronize()


_FACTORIES: dict[str, Callable[[], Backend]] = {
    "numpy": NumpyBackend,
    "torch-cpu": lambda: TorchBackend("cpu"),
    "torch-cuda": lambda: TorchBackend("cuda"),
    "cupy": CupyBackend,
}
_INSTANCES: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend called ``name``, one of :data:`numoracle.targets.target.BACKENDS`.

    Getting a backend imports nothing; ask :meth:`Backend.available` before use.
    """
    if name not in _FACTORIES:
        raise InvalidArgument(f"backend {name!r} is unknown; use one of {BACKENDS}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _FACTORIES[name]()
    return _INSTANCES[name]
