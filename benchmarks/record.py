"""What a benchmark result records beside its numbers: the command that made it,
the machine, the versions and the code.

Every command of the harness writes its results through :func:`write_json` (and
:func:`write_text` for tables), so a result file names how to make it again.
"""

from __future__ import annotations

import datetime
import json
import platform
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["command_line", "machine", "meta", "write_json", "write_text"]


def command_line(argv: Sequence[str]) -> str:
    """The harness command that ``argv`` (the arguments after ``-m benchmarks``) runs."""
    return "python -m benchmarks " + " ".join(shlex.quote(a) for a in argv)


def machine() -> dict[str, Any]:
    """The platform, the CPU count, the versions of the array libraries and the GPU, if any."""
    import os  # noqa: PLC0415 - only here

    import numpy as np  # noqa: PLC0415

    import numoracle  # noqa: PLC0415

    out: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count(),
                           "python": platform.python_version(), "numpy": np.__version__,
                           "numoracle": numoracle.__version__}
    try:
        import torch  # noqa: PLC0415 - optional

        out["torch"] = torch.__version__
        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return out


def _commit() -> str | None:
    """The checkout's commit (with ``+dirty`` for local changes), or None outside git."""
    try:
        here = Path(__file__).resolve().parent
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("+dirty" if dirty.strip() else "")


def meta(argv: Sequence[str], **extra: Any) -> dict[str, Any]:
    """The record of a run: its command, when, on which machine, at which commit."""
    return {"command": command_line(argv),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": _commit(), **machine(), **extra}


def write_json(path: Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` (folders made); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (folders made); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
