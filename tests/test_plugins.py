"""Third-party targets and ops through the entry point group ``numoracle.targets``.

The example package is ``tests/plugin_example`` (a pyproject.toml declaring the
entry point and a ten-line module); the tests install its metadata the way pip
does (a ``*.dist-info`` folder with ``entry_points.txt`` on ``sys.path``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import numoracle
from numoracle.errors import InvalidArgument
from numoracle.kernels import all_targets, get_target
from numoracle.oracle.ops import OPS, get_op
from numoracle.plugins import ENTRY_POINT_GROUP, load_plugins

EXAMPLE = Path(__file__).parent / "plugin_example"

OP_MODULE = '''
from numoracle.oracle.ops.matmul import Matmul


class PluginMatmul(Matmul):
    name = "plugin_matmul"


OPS = (PluginMatmul(),)
'''


def _install(site: Path, name: str, entry: str, module: str, source: str) -> None:
    """What pip leaves behind: the module and a dist-info with the entry point."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry} = {module}\n")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("numoracle_example")]:
            del sys.modules[name]
        OPS.pop("plugin_matmul", None)
        load_plugins(refresh=True)


def test_the_example_package_adds_a_target_that_is_checked(site: Path) -> None:
    load_plugins(refresh=True)
    assert "example-plugin-fp32" not in {t.name for t in all_targets()}
    source = (EXAMPLE / "numoracle_example_plugin.py").read_text()
    _install(site, "numoracle_example_plugin", "example", "numoracle_example_plugin", source)
    assert 'example = "numoracle_example_plugin"' in (EXAMPLE / "pyproject.toml").read_text()
    load_plugins(refresh=True)
    target = get_target("example-plugin-fp32", "matmul")
    assert target in all_targets("matmul")
    result = numoracle.check_kernel(target.fn, op="matmul", precision="fp32", examples=5,
                                    store=None)
    assert result.verdict == "pass"


def test_a_plugin_adds_an_op(site: Path) -> None:
    _install(site, "numoracle_example_ops", "ops", "numoracle_example_ops", OP_MODULE)
    with pytest.raises(InvalidArgument, match="plugin_matmul"):
        get_op("plugin_matmul")  # not installed yet: unknown (loading finds nothing)
    load_plugins(refresh=True)
    assert get_op("plugin_matmul").name == "plugin_matmul"


def test_a_broken_plugin_is_named(site: Path) -> None:
    _install(site, "numoracle_example_broken", "broken", "numoracle_example_broken",
             "raise RuntimeError('half installed')\n")
    with pytest.raises(InvalidArgument, match=r"plugin 'broken'.*half installed"):
        load_plugins(refresh=True)
    shutil.rmtree(site / "numoracle_example_broken-0.1.dist-info")


def test_a_new_op_needs_no_registry_edit() -> None:
    """Ops, targets and CLI groups come from their own modules: each op has a plan
    for all its parameters, and every group names ops that exist."""
    from numoracle.oracle.ops import OP_GROUPS

    for name, op in OPS.items():
        assert sorted(s.name for s in op.draw_plan()) == sorted(op.param_names), name
    for group, members in OP_GROUPS.items():
        assert members and all(get_op(m).group == group for m in members)
    assert {t.op for t in all_targets()} <= set(OPS)
