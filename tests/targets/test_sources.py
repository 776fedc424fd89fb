"""Finding a target again: by its source below the checks, by name only through a
resolver handed down from above (numoracle.kernels.resolve_target)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from numoracle.checking.replay import find_target
from numoracle.errors import InvalidArgument
from numoracle.kernels import get_target, resolve_target
from numoracle.targets import find_in_source

SOURCE = '''
import numpy as np
from numoracle.targets import Target

def mm(a, b):
    return {"out": np.matmul(a, b)}

TARGETS = [Target(name="mine", op="matmul", backend="numpy", precision="fp32", fn=mm)]
'''


def test_a_target_is_found_in_its_source(tmp_path: Path) -> None:
    src = tmp_path / "my_targets.py"
    src.write_text(SOURCE)
    t = find_in_source("mine", "matmul", str(src))
    assert t.name == "mine" and t.op == "matmul"
    with pytest.raises(InvalidArgument, match="has no target 'other'"):
        find_in_source("other", "matmul", str(src))


def test_a_built_in_target_is_found_only_by_a_resolver_that_knows_the_registry() -> None:
    repro = SimpleNamespace(kernel=None, target_name="numpy-fp32", op="matmul", source=None)
    with pytest.raises(InvalidArgument, match="resolve=numoracle.kernels.resolve_target"):
        find_target(repro)  # type: ignore[arg-type]
    found = find_target(repro, resolve_target)  # type: ignore[arg-type]
    assert found == get_target("numpy-fp32", "matmul")
