"""The oldest dependency set (``tox -e py-oldest``) pins exactly the lower bounds
pyproject.toml states, so the bounds stay true when one of them moves."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def _lower_bounds() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("test", "report", "ray"):
        reqs += project["optional-dependencies"][extra]
    bounds = {}
    for req in reqs:
        m = re.search(r">=\s*([0-9][0-9.]*)", req)
        if m:
            bounds[_name(req)] = m.group(1)
    return bounds


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints" / "oldest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_name(name)] = version.strip()
    return pins


def _same(a: str, b: str) -> bool:
    def parts(v: str) -> list[int]:
        out = [int(x) for x in v.split(".")]
        return out + [0] * (3 - len(out))

    return parts(a) == parts(b)


def test_oldest_constraints_pin_the_lower_bounds() -> None:
    bounds, pins = _lower_bounds(), _pins()
    for name in ("numpy", "hypothesis", "mpmath", "rich", "ml-dtypes", "pytest",
                 "pytest-xdist", "matplotlib"):
        assert name in bounds, f"pyproject.toml states no lower bound for {name}"
        assert name in pins, f"constraints/oldest.txt does not pin {name}"
        assert _same(pins[name], bounds[name]), (name, pins[name], bounds[name])
    # torch: the local CPU build, inside the admitted range
    assert pins["torch"] == "2.13.0" and bounds["torch"] == "2.1"
