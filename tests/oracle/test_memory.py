"""A checking run keeps freed memory for reuse (glibc), unless told not to."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = """
from numoracle.oracle import memory
before = memory.reuse_for_checking.cache_info().currsize
on = memory.reuse_for_checking()
print(before, on, memory.reuse_for_checking() is on)
"""


def _probe(**env: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_checking_run_reuses_freed_memory_unless_switched_off() -> None:
    assert _probe() == ["0", "True", "True"]  # nothing at import; on once asked
    assert _probe(NUMORACLE_REUSE_MEMORY="0") == ["0", "False", "True"]


def test_run_target_asks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from numoracle.kernels import get_target
    from numoracle.running import runner

    asked: list[bool] = []
    monkeypatch.setattr(runner, "reuse_for_checking", lambda: asked.append(True) or True)
    runner.run_target(get_target("numpy-fp32", "matmul"), examples=1, store=None)
    assert asked == [True]
