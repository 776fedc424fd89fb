"""The regression store under concurrent writers: 8 pytest-xdist workers and two
``numoracle zoo`` runs at once on one store, one worker killed mid-run.

A generated test module holds ``numoracle.validate`` tests of broken linear
kernels (four bugs, eight kernel names, each name tested by several tests, so
that workers race on the same signatures and replay each other's repros) and
of correct ones. While pytest runs it with ``-n 8``, two ``numoracle zoo --ops
linear`` runs (seeds 1 and 2) write into the same store, and one xdist worker
is killed with SIGKILL once the store holds its first repros.

Afterwards every folder of the store is checked: ``repro.json`` parses,
``arrays.npz`` loads, the repro replays and still fails; every repro a run
reported (pytest's failure messages, the zoo reports) exists; temporary folders
left by the killed worker are counted.

Usage::

    python benchmarks/store_concurrency.py OUT [--workers 8]

writes ``OUT/store_concurrency.json`` (numbers, command, machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from numoracle.store.repro import load_repro, replay
from numoracle.store.store import entries

ROOT = Path(__file__).resolve().parents[1]

TESTS = '''
import numoracle

def _bug(kind):
    def kernel(x, weight, grad_output, bias=None):
        y = x @ weight.T
        gi, gw = grad_output @ weight, grad_output.T @ x
        if kind == "bias_twice" and bias is not None:
            y = y + 2 * bias
        elif bias is not None:
            y = y + bias
        if kind == "drop_last":
            y = x[:, :-1] @ weight[:, :-1].T + (bias if bias is not None else 0)
        if kind == "transposed" and weight.shape[0] == weight.shape[1]:
            y = x @ weight + (bias if bias is not None else 0)
        if kind == "grad_input_half":
            gi = 0.5 * gi
        out = {"y": y, "grad_input": gi, "grad_weight": gw}
        if bias is not None:
            out["grad_bias"] = grad_output.sum(0)
        return out
    return kernel

KINDS = ("bias_twice", "drop_last", "transposed", "grad_input_half", "none")
'''


def test_module(n_tests: int) -> str:
    lines = [TESTS]
    for i in range(n_tests):
        kind = ("bias_twice", "drop_last", "transposed", "grad_input_half", "none")[i % 5]
        name = f"{kind}_{i % 10 // 5}" if kind != "none" else f"correct_{i % 2}"
        lines.append(f"test_{i:03d} = numoracle.validate(op='linear', name={name!r}, "
                     f"examples=20, seed={i})(_bug({kind!r}))")
    return "\n".join(lines) + "\n"


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True,
                         text=True, check=False).stdout
    return [int(p) for p in out.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--tests", type=int, default=80)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="numoracle-store-"))
    (work / "test_generated.py").write_text(test_module(args.tests))
    store = work / ".numoracle" / "repros"
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    pytest = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-n", str(args.workers), "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--junitxml", str(work / "junit.xml"), "-o",
         "junit_logging=no", "test_generated.py"], cwd=work, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    zoos = [subprocess.Popen(
        [sys.executable, "-m", "numoracle", "zoo",
         "--ops", "linear", "--examples", "50", "--seed", str(seed), "--store", str(store),
         "--report", str(work / f"zoo{seed}")], cwd=work, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for seed in (1, 2)]
    killed = None
    while pytest.poll() is None and killed is None:
        time.sleep(0.2)
        workers = children(pytest.pid)
        if len(entries(store)) >= 2 and len(workers) >= args.workers:
            killed = workers[len(workers) // 2]
            os.kill(killed, signal.SIGKILL)
    pytest_out = pytest.communicate()[0]
    zoo_outs = [z.communicate()[0] for z in zoos]
    wall = time.perf_counter() - t0
    (args.out / "pytest.log").write_text(pytest_out)
    for i, text in enumerate(zoo_outs, 1):
        (args.out / f"zoo{i}.log").write_text(text)

    # every folder valid and replayable
    folders = [f for f in store.iterdir() if f.is_dir() and not f.name.startswith(".")] \
        if store.is_dir() else []
    valid, corrupt, still_fail, problems = 0, 0, 0, []
    for f in folders:
        try:
            r = load_repro(f)
            np.asarray(next(iter(r.inputs.values()))).sum()
            valid += 1
            v = replay(f)
            still_fail += not v.passed
        except Exception as exc:  # noqa: BLE001 - counted and named
            corrupt += 1
            problems.append(f"{f.name}: {type(exc).__name__}: {exc}")
    signatures = {json.dumps(e.signature, sort_keys=True) for e in entries(store)}
    # every repro a run reported exists
    reported = set(re.findall(r"repro: (\S+)", (work / "junit.xml").read_text()
                              if (work / "junit.xml").is_file() else ""))
    for seed in (1, 2):
        zoo_json = work / f"zoo{seed}" / "zoo.json"
        if zoo_json.is_file():
            reported |= {r["repro"] for r in json.loads(zoo_json.read_text()) if r["repro"]}
    resolved = {str((work / p).resolve()) if not os.path.isabs(p) else p for p in reported}
    missing = sorted(p for p in resolved if not (Path(p) / "repro.json").is_file())
    summary = re.findall(r"^=*\s*(\d+ (?:failed|passed).*) in [\d.]+s", pytest_out, re.M)
    crashed = re.findall(r"^.*(?:crashed|node down).*$", pytest_out, re.M)
    replayed = re.findall(r"^stored repros replayed first.*$", pytest_out, re.M)
    result = {
        "command": " ".join([sys.argv[0], *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "workers": args.workers, "tests": args.tests, "concurrent_zoo_runs": 2,
        "killed_worker_pid": killed, "pytest_summary": summary[-1] if summary else None,
        "xdist_crash_report": crashed[:3], "pytest_store_line": replayed[-1] if replayed else None,
        "format_file": (store / "numoracle-store.json").read_text().strip()
        if (store / "numoracle-store.json").is_file() else None,
        "pytest_exit": pytest.returncode, "zoo_exits": [z.returncode for z in zoos],
        "folders": len(folders), "distinct_signatures": len(signatures), "valid": valid,
        "corrupt": corrupt, "replayed_still_failing": still_fail,
        "reported_repros": len(resolved), "reported_missing": missing,
        "temporary_left": len(list(store.glob(".tmp-*"))) if store.is_dir() else 0,
        "wall_s": round(wall, 1), "problems": problems, "workdir": str(work),
    }
    (args.out / "store_concurrency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "problems"}, indent=2))
    return 0 if not corrupt and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
