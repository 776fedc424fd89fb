"""The benchmark harness: every command module is a subcommand, and a command's
results record the command, machine and commit that made them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the harness is a package of the checkout, beside tests/
    sys.path.insert(0, str(ROOT))


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


def _choices(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``ap`` by name, aliases left out (none without subparsers)."""
    for action in ap._actions:  # argparse keeps no public list of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            named = {}
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    named[name] = child
            return named
    return {}


def test_every_subcommand_and_survey_says_what_it_does(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """``--help`` works for every command and every sub-command under it (the folded
    traced, kernelbench, sharpness and mistakes benchmarks included), in-process."""
    from benchmarks.__main__ import main, parser

    commands = _choices(parser())
    assert {"traced", "kernelbench", "mistakes", "sharpness"} <= set(commands)
    assert "--cudnn-winograd" in commands["sharpness"].format_help()
    assert {"sweep", "cost", "census", "stress", "zoo", "references"} <= set(
        _choices(commands["traced"]))
    assert {"census", "soundness", "mutants"} <= set(_choices(commands["kernelbench"]))
    for name, command in commands.items():
        for argv in ([name], *([name, s] for s in _choices(command))):
            with pytest.raises(SystemExit) as done:
                main([*argv, "--help"])
            assert done.value.code == 0, argv
            out = capsys.readouterr().out
            assert out.startswith(f"usage: python -m benchmarks {' '.join(argv)}"), out
            parsers = [commands[name], *([_choices(command)[argv[1]]] if argv[1:] else [])]
            description = parsers[-1].description
            assert description, argv
            assert " ".join(description.split()[:4]) in " ".join(out.split()), (argv, out)


def test_the_traced_families_listed_for_help_are_the_references() -> None:
    pytest.importorskip("torch")
    from benchmarks.commands.traced import FAMILIES
    from benchmarks.traced.references import FAMILIES as REFERENCES

    assert tuple(REFERENCES) == FAMILIES


def test_kernelbench_soundness_shards_merge_into_one_table(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from benchmarks.kernelbench.soundness import merge

    head = {"command": "python -m benchmarks kernelbench soundness P", "device": "CPU",
            "torch": "x"}
    shards = []
    for i, rows in enumerate((
            [{"problem": "level1/2_b", "fp32": {"status": "fail", "reason": "out of bound"}}],
            [{"problem": "level1/10_c", "fp32": {"status": "pass"}},
             {"problem": "level1/1_a", "status": "not judged"}])):
        shards.append(tmp_path / f"s{i}.json")
        shards[-1].write_text(json.dumps({"meta": head, "rows": rows}))
    md = merge(shards, tmp_path / "out").read_text()
    assert "| fp32 | 2 | 1 | 1 | 0 | 0 |" in md
    assert "Not judged (a missing rule or no valid size): 1." in md
    assert md.index("level1/2_b") < md.index("level1/10_c")  # by problem number
    merged = json.loads((tmp_path / "out" / "soundness.json").read_text())
    assert [r["problem"] for r in merged["rows"]] == ["level1/1_a", "level1/2_b", "level1/10_c"]


def test_the_linear_reference_on_cupys_path_waits_once_and_launches_few(tmp_path: Path) -> None:
    """``host_calls`` runs the linear backward's reference on NumPy, in torch's namespace
    (CPU tensors) and, through the counting stand-in of CuPy (in its own process), on
    CuPy's path: one host wait (the operands' facts), and per contraction two cuBLAS
    calls (value, TF32 magnitude sum) and one pass after them (four contractions, the
    sum over the batch among them), the four operands' facts one launch."""
    pytest.importorskip("numba")
    pytest.importorskip("torch")
    out = tmp_path / "calls.json"
    done = _harness("host_calls", "--shape", "4,8,8", "--small", "2,4,4", "--standin-shape",
                    "4,8,8", "--calls", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["namespace"] for r in rows[:4]] == ["numpy", "torch"] * 2
    assert [r["shape"] for r in rows[:4]] == [[4, 8, 8]] * 2 + [[2, 4, 4]] * 2
    assert all(r["python_calls"]["numoracle"] > 0 for r in rows[:4])
    standin = [r for r in rows if "stand-in" in r["namespace"]]
    if not standin:
        pytest.skip("CuPy imports here: no stand-in")
    device = standin[0]["device"]
    assert standin[0]["host_waits"] == 1, device
    assert device["launch:cublas gemmEx"] == 8, device
    passes = sum(v for k, v in device.items() if "exact" in k)
    facts = sum(v for k, v in device.items() if "operand_facts" in k)
    assert (passes, facts) == (4, 1), device
    assert standin[0]["device_calls"] <= 15, device
