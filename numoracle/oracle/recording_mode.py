"""The switch of recorded evaluations (``NUMORACLE_RECORD``): traced references
(:mod:`~numoracle.oracle.traced.recording`) and hand-written ones
(:mod:`~numoracle.oracle.recorded`) alike. Reading it imports nothing."""

from __future__ import annotations

import os

from ..errors import InvalidArgument

__all__ = ["mode", "MODES", "MODE_VARIABLE"]

#: the environment variable that switches recorded evaluations on (:data:`MODES`)
MODE_VARIABLE = "NUMORACLE_RECORD"
#: ``off``: every case evaluated; ``replay``: a signature's second case is recorded and
#: later ones replayed op by op; ``compile``: replayed compiled; ``graphs``: compiled and
#: replayed as a CUDA graph (on a GPU)
MODES = ("off", "replay", "compile", "graphs")


def mode() -> str:
    """The recording mode :data:`MODE_VARIABLE` names (``off`` unset).

    Raises
    ------
    InvalidArgument
        For a name not in :data:`MODES`.
    """
    name = os.environ.get(MODE_VARIABLE, "off").strip().lower() or "off"
    if name not in MODES:
        raise InvalidArgument(f"{MODE_VARIABLE}={name!r} is unknown; use one of {MODES}")
    return name
