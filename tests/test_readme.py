"""The README's example runs as written, and its set-up commands match CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_kernel_example_runs_and_passes(tmp_path: Path, monkeypatch) -> None:
    block = re.search(r"## Check your own kernel\n\n```python\n(.*?)```", README, re.S)
    assert block, "README lost its example"
    monkeypatch.chdir(tmp_path)  # repros, if any, land here
    namespace: dict = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    assert callable(namespace["test_my_linear"])


def test_ci_runs_the_readme_test_command() -> None:
    cmd = re.findall(r"```sh\n(.*?)\n```", README)[1].split("&&")[-1].strip()
    assert cmd == "python -m pytest -n 2 -q"
    assert cmd in (ROOT / ".ci" / "run").read_text()
