"""The benchmark harness: every command module is a subcommand, and a command's
results record the command, machine and commit that made them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def test_every_command_module_is_a_subcommand() -> None:
    done = _harness("--help")
    assert done.returncode == 0, done.stderr
    modules = sorted(p.stem for p in (ROOT / "benchmarks" / "commands").glob("*.py")
                     if not p.name.startswith("_"))
    assert {"sweep", "zoo"} <= set(modules)
    listed = {line.split()[0] for line in done.stdout.split("positional arguments:")[1]
              .splitlines() if line.startswith("    ") and not line.startswith("     ")}
    assert set(modules) <= listed, (modules, done.stdout)


def test_a_sweep_records_its_rows_and_command(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    done = _harness("sweep", "--ops", "matmul", "--targets", "numpy-fp32", "--examples", "5",
                    "--jobs", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "soundness.json").read_text())
    (row,) = result["rows"]
    assert (row["target"], row["op"], row["cases"], row["failures"]) == ("numpy-fp32", "matmul",
                                                                         5, 0)
    assert 0 < row["worst_ratio"] < 1
    assert result["meta"]["command"].startswith("python -m benchmarks sweep --ops matmul")
    assert result["meta"]["machine"] and result["meta"]["numpy"]
    assert "numpy-fp32" in (out / "soundness.md").read_text()


def test_the_validation_page_is_what_the_results_give() -> None:
    """docs/validation.md is generated: never edited by hand, never stale (run
    ``python -m benchmarks validation`` after changing a result it reads)."""
    done = _harness("validation", "--check")
    assert done.returncode == 0, done.stderr
