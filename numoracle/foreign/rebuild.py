"""How a repro finds a foreign target again.

A foreign target's ``source`` is a small ``.py`` file holding its spec (the
library path, symbol and argument spec; or the command) and
``TARGETS = (from_spec(SPEC),)``: ``numoracle replay`` loads it and re-runs
the same library call or command. The file is written when the target is made,
in ``spec_dir`` (default ``.numoracle/targets``), named by the spec's digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cases.target import Target
from ..errors import InvalidArgument

__all__ = ["write_source", "from_spec", "DEFAULT_SPEC_DIR"]

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


def from_spec(spec: Mapping[str, Any], *, source: str | None = None) -> Target:
    """The target a spec describes (``kind``: ``shared_library`` or ``command``)."""
    kw = {k: v for k, v in spec.items() if k != "kind"}
    kind = spec.get("kind")
    if kind == "shared_library":
        from .sharedlib import shared_library_target  # noqa: PLC0415 - cycle

        return shared_library_target(source=source, **kw)
    if kind == "command":
        from .command import command_target  # noqa: PLC0415 - cycle

        return command_target(source=source, **kw)
    raise InvalidArgument(f"spec kind {kind!r} is unknown; a foreign target spec has kind "
                          "'shared_library' or 'command'")
