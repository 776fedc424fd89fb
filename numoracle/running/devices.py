"""The GPUs of the host and a worker pool per GPU.

A process started with ``CUDA_VISIBLE_DEVICES=i`` sees GPU ``i`` alone, as
its device 0: that is how work is spread over the GPUs of one host without
each process choosing its device (CuPy, torch and a user's kernel all use
the current device). :func:`gpu_devices` lists the GPUs this process may
hand out — those ``CUDA_VISIBLE_DEVICES`` names where it is set, else every
GPU the NVIDIA driver lists — and :func:`worker_devices` gives worker ``w``
of a pool of ``n`` its GPU, round robin, so that the workers of one GPU form
that GPU's pool and every GPU gets as many workers as any other, give or
take one.

Setting ``CUDA_VISIBLE_DEVICES`` also lets a machine without GPUs stand in
for one with several (``CUDA_VISIBLE_DEVICES=0,1``): the workers are pinned
all the same, which is how the pools are tested.

:func:`map_on_devices` runs a function over items in one process per GPU,
each item where a process is free: what ``numoracle kernelbench`` uses to
judge candidates side by side.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import shutil
import subprocess
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import InvalidArgument

__all__ = ["VISIBLE", "gpu_devices", "nvidia_gpu_count", "worker_devices", "pinned",
           "map_on_devices", "DeviceTaskError"]

#: the variable that names the GPUs a process sees
VISIBLE = "CUDA_VISIBLE_DEVICES"

T = TypeVar("T")
R = TypeVar("R")


class DeviceTaskError(RuntimeError):
    """An item of :func:`map_on_devices` raised in its process (the traceback
    is the message) or its process died."""


def nvidia_gpu_count() -> int:
    """GPUs the NVIDIA driver lists (``nvidia-smi -L``), without initialising
    CUDA in this process; 0 where there is no driver."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gpu_devices(env: Mapping[str, str] | None = None,
                count: Callable[[], int] = nvidia_gpu_count) -> tuple[str, ...]:
    """The GPUs this process may hand to workers, as ``CUDA_VISIBLE_DEVICES``
    entries.

    Where ``CUDA_VISIBLE_DEVICES`` is set (in ``env``, by default
    ``os.environ``), its entries up to the first invalid one, as CUDA reads
    it (``-1`` or an empty value: none); else ``"0"`` to ``"n-1"`` for the
    ``n`` GPUs the driver lists (``count()``).

    Examples
    --------
    >>> gpu_devices({"CUDA_VISIBLE_DEVICES": "2,3"})
    ('2', '3')
    >>> gpu_devices({}, count=lambda: 2)
    ('0', '1')
    >>> gpu_devices({"CUDA_VISIBLE_DEVICES": ""})
    ()
    """
    env = os.environ if env is None else env
    given = env.get(VISIBLE)
    if given is None:
        return tuple(str(i) for i in range(count()))
    devices: list[str] = []
    for entry in (e.strip() for e in given.split(",")):
        if not entry or entry.startswith("-"):
            break  # CUDA ignores this entry and every one after it
        devices.append(entry)
    return tuple(devices)


def worker_devices(workers: int, devices: Sequence[str]) -> list[str | None]:
    """The GPU of each of ``workers`` workers: ``devices[w mod len(devices)]``,
    or None for every worker where there are fewer than two GPUs (one GPU,
    or none, needs no pinning).

    >>> worker_devices(5, ("0", "1"))
    ['0', '1', '0', '1', '0']
    >>> worker_devices(2, ("0",))
    [None, None]
    """
    if workers < 0:
        raise InvalidArgument(f"{workers=} must be a count of workers, 0 or more")
    if len(devices) < 2:
        return [None] * workers
    return [devices[w % len(devices)] for w in range(workers)]


@contextlib.contextmanager
def pinned(device: str | None) -> Iterator[None]:
    """``CUDA_VISIBLE_DEVICES`` set to ``device`` in this process while the
    block runs (a process started then inherits it; None: left as it is)."""
    if device is None:
        yield
        return
    old = os.environ.get(VISIBLE)
    os.environ[VISIBLE] = device
    try:
        yield
    finally:
        if old is None:
            del os.environ[VISIBLE]
        else:
            os.environ[VISIBLE] = old


def _serve(fn: Callable[[Any], Any], tasks: Any, done: Any) -> None:
    """One device's process: items from ``tasks`` until None, each result (or
    the traceback of what it raised) to ``done``."""
    while True:
        got = tasks.get()
        if got is None:
            return
        index, item = got
        try:
            done.put((index, True, fn(item), os.environ.get(VISIBLE)))
        except Exception:  # noqa: BLE001 - handed back to the caller, which raises it
            done.put((index, False, traceback.format_exc(), os.environ.get(VISIBLE)))


def map_on_devices(fn: Callable[[T], R], items: Sequence[T],
                   devices: Sequence[str] | None = None,
                   on_result: Callable[[int, R, str | None], None] | None = None) -> list[R]:
    """``[fn(item) for item in items]``, computed in one process per GPU.

    Each process is started (``spawn``: no inherited CUDA state) with
    ``CUDA_VISIBLE_DEVICES`` naming its GPU and takes the next item whenever
    it is free, so a slow item holds up one GPU only. With fewer than two
    GPUs (``devices``, by default :func:`gpu_devices`) or fewer than two
    items, the items are computed here, in order.

    Parameters
    ----------
    fn : callable
        A module-level function (it is pickled by reference); items and
        results must pickle.
    items : sequence
        The work.
    devices : sequence of str, optional
        ``CUDA_VISIBLE_DEVICES`` entries, one process each.
    on_result : callable, optional
        ``on_result(index, result, device)`` as each item is done, in the
        order they finish.

    Returns
    -------
    list
        The results in the order of ``items``.

    Raises
    ------
    DeviceTaskError
        When ``fn`` raised on an item (the first such, with its traceback)
        or a process died.
    """
    devices = gpu_devices() if devices is None else tuple(devices)
    if len(devices) < 2 or len(items) < 2:
        out = []
        for i, item in enumerate(items):
            out.append(fn(item))
            if on_result is not None:
                on_result(i, out[-1], None)
        return out
    ctx = multiprocessing.get_context("spawn")
    tasks, done = ctx.Queue(), ctx.Queue()
    for i, item in enumerate(items):
        tasks.put((i, item))
    procs = []
    for device in devices[:len(items)]:
        tasks.put(None)  # one stop per process, after every item
        with pinned(device):
            p = ctx.Process(target=_serve, args=(fn, tasks, done), daemon=True,
                            name=f"numoracle-gpu-{device}")
            p.start()
        procs.append(p)
    results: dict[int, Any] = {}
    try:
        while len(results) < len(items):
            try:
                index, ok, value, device = done.get(timeout=1.0)
            except queue.Empty:  # see whether a process died
                if not any(p.is_alive() for p in procs) and done.empty():
                    raise DeviceTaskError(f"the GPU processes ended with {len(results)} of "
                                          f"{len(items)} items done") from None
                continue
            if not ok:
                raise DeviceTaskError(f"item {index} failed on GPU {device}:\n{value}")
            results[index] = value
            if on_result is not None:
                on_result(index, value, device)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join(timeout=5)
    return [results[i] for i in range(len(items))]
