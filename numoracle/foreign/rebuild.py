"""How a repro finds a foreign target again.

A foreign target's ``source`` is a small ``.py`` file holding its spec (the
library path, symbol and argument spec; or the command) and
``TARGETS = (from_spec(SPEC),)``: ``numoracle replay`` loads it and re-runs
the same library call or command. The file is written when the target is made,
in ``spec_dir`` (default ``.numoracle/targets``), named by the spec's digest.
:func:`numoracle.foreign.from_spec` makes the target again from its spec (the
constructors import this module; nothing here imports them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_source", "DEFAULT_SPEC_DIR"]

#: where foreign targets' spec files go unless told otherwise
DEFAULT_SPEC_DIR = Path(".numoracle") / "targets"

_SOURCE = '''"""numoracle foreign target {name!r}: rebuilt from this spec by `numoracle replay`."""
import json

from numoracle.foreign import from_spec

SPEC = json.loads(r"""{spec}""")
TARGETS = (from_spec(SPEC, source=__file__),)
'''


def write_source(spec: Mapping[str, Any], spec_dir: Path | str | None) -> str:
    """Write the spec file of a target; returns its absolute path."""
    text = json.dumps(spec, indent=2, sort_keys=True)
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    folder = Path(DEFAULT_SPEC_DIR if spec_dir is None else spec_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(spec["name"]))
    path = folder / f"{safe}-{digest}.py"
    if not path.is_file() or path.read_text() != _SOURCE.format(name=spec["name"], spec=text):
        path.write_text(_SOURCE.format(name=spec["name"], spec=text))
    return str(path)
