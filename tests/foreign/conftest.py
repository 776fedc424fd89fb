"""Building the worked examples of ``examples/`` into temporary folders; a test
skips cleanly where the compiler is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def compiler(name: str) -> str:
    """The path of compiler ``name``, or a skip of the test."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed here")
    return path


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``build(tool, *args, out="lib.so")``: run a compiler into a session
    temporary folder, once per command; returns the output path."""
    folder = tmp_path_factory.mktemp("foreign-build")
    done: dict[tuple[str, ...], Path] = {}

    def run(tool: str, *args: str, out: str) -> Path:
        exe = compiler(tool)
        key = (tool, *args, out)
        if key not in done:
            path = folder / out
            cmd = [exe, *[a.replace("{out}", str(path)).replace("{dir}", str(folder))
                          for a in args]]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr}"
            done[key] = path
        return done[key]

    return run


def _parse_shapes(repro_shape: str) -> dict[str, tuple[int, ...]]:
    """``"a(1, 4), b(4, 1)"`` -> ``{"a": (1, 4), "b": (4, 1)}``."""
    return {name: tuple(int(v) for v in dims.replace(" ", "").split(",") if v)
            for name, dims in re.findall(r"(\w+)\(([^)]*)\)", repro_shape or "")}


@pytest.fixture
def shapes_of() -> Callable[[str], dict[str, tuple[int, ...]]]:
    """The arrays of a shrunk repro, by name: tests bound them instead of naming the
    exact shape the shrinker reached (Hypothesis is free to change its shrinker)."""
    return _parse_shapes
