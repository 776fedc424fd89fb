"""The README's examples run as written, and its set-up commands match CI.

Every ``python`` block of the README runs, in order, in one namespace (a later
block may use what an earlier one defined), from a scratch folder where the
shell commands the README gives before a block (building a shared library)
have been run. A block that needs what this machine lacks (a compiler) skips
with the reason; none is left out silently. A block that needs a GPU starts
with the line ``# needs a GPU`` and runs only where CuPy sees one.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from numoracle.oracle.ops import OP_GROUPS, OPS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
#: `gcc ...` commands the README gives in its prose, run before the blocks
BUILD = re.compile(r"`(gcc [^`]+)`")


GPU_MARK = "# needs a GPU"


def _gpu_here() -> bool:
    try:
        import cupy
    except ImportError:
        return False
    try:
        return bool(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no driver, no device: no GPU
        return False


def _python_blocks() -> list[str]:
    blocks = [m.group(2) for m in BLOCK.finditer(README) if m.group(1) == "python"]
    return [b for b in blocks if not b.startswith(GPU_MARK) or _gpu_here()]


def _run_build_commands(folder: Path) -> None:
    """Run the README's build commands in ``folder``, with ``examples/`` beside them."""
    commands = BUILD.findall(README)
    if not commands:
        return
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the README's C example cannot be built")
    shutil.copytree(ROOT / "examples", folder / "examples")
    for command in commands:
        subprocess.run(shlex.split(command), cwd=folder, check=True)


def test_every_python_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 3, "README lost its examples"
    _run_build_commands(tmp_path)
    monkeypatch.chdir(tmp_path)  # repros, if any, land here
    namespace: dict = {"__name__": "readme"}
    printed = io.StringIO()
    registered, groups = dict(OPS), dict(OP_GROUPS)  # a PyTorch-reference block registers an op
    try:
        with contextlib.redirect_stdout(printed):
            for number, block in enumerate(blocks, 1):
                exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    finally:  # later tests in this process see the registry as it was
        OPS.clear()
        OPS.update(registered)
        OP_GROUPS.clear()
        OP_GROUPS.update(groups)
    out = printed.getvalue()
    assert callable(namespace["test_my_linear"])
    namespace["test_my_linear"]()  # the pytest form passes too
    # the broken kernel's block printed its KernelMismatch: the example shows a catch
    assert "logic bug" in out, out
    assert "pass" in out, out  # the C kernel's verdict


def test_every_code_block_is_python_sh_or_output() -> None:
    """A block of another kind would not be run by the test above: say which kinds exist."""
    kinds = {m.group(1) for m in BLOCK.finditer(README)}
    assert kinds <= {"python", "sh", ""}, kinds


def test_ci_runs_the_readme_test_command() -> None:
    cmd = re.findall(r"```sh\n(.*?)\n```", README)[1].split("&&")[-1].strip()
    assert cmd == "python -m pytest -n 2 -q"
    assert cmd in (ROOT / ".ci" / "run").read_text()


def test_ci_installs_as_the_readme_says() -> None:
    """The README's second command is CI's set-up: the same install, the same test run."""
    setup = re.findall(r"```sh\n(.*?)\n```", README)[1].split("&&")
    install = next(part.strip() for part in setup if part.strip().startswith("pip install"))
    assert install.replace("pip install ", "pip install -q ") in (ROOT / ".ci" / "run").read_text()


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250
