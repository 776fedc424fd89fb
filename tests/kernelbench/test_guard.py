"""The candidate's process's raw memory: snapshots and comparisons in place, a
device's bytes read a piece at a time (no whole copy), any changed byte found."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from numoracle.kernelbench import guard
from numoracle.kernelbench.guard import RawMemory


def _address(a: np.ndarray) -> int:
    return int(a.ctypes.data)


def test_a_snapshot_holds_the_bytes_as_they_were() -> None:
    memory = RawMemory("cpu")
    a = np.arange(1000, dtype=np.float32)
    held = memory.snapshot(_address(a), a.nbytes)
    at = ctypes.addressof(ctypes.c_char.from_buffer(held))
    assert memory.same(_address(a), at, a.nbytes)
    a[999] = -1.0  # the last byte range changed after the snapshot
    assert not memory.same(_address(a), at, a.nbytes)
    assert memory.same(_address(a), at, 999 * 4)  # the bytes before it did not change


@pytest.mark.parametrize("changed", [0, 4095, 4096, 10_000, 16_383])
def test_device_bytes_compared_piece_by_piece_find_any_changed_byte(
        monkeypatch: pytest.MonkeyPatch, changed: int) -> None:
    """The device path (pieces read into one buffer, each compared) on host memory:
    pieces of 4 KiB over 16 KiB, a byte changed in the first, a middle or the last."""
    memory = RawMemory("cpu")
    memory.cuda = True  # the piecewise path; its copies are host copies here
    monkeypatch.setattr(memory, "copy_to_host",
                        lambda dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(guard, "PIECE_BYTES", 4096)
    src = np.random.default_rng(0).integers(0, 256, 16_384, dtype=np.uint8)
    same = src.copy()
    assert memory.same(_address(src), _address(same), src.nbytes)
    same[changed] ^= 1
    assert not memory.same(_address(src), _address(same), src.nbytes)
    assert memory.same(_address(src), _address(same), changed)  # up to it: equal
