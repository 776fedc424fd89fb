"""``python -m numoracle``: the command line (see :mod:`numoracle.cli`)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
