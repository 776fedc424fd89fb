"""A case's inputs drawn again in the candidate's process, checked to be the judge's.

By default the judge hands a case's inputs to the candidate's process as host
arrays (:mod:`.sandbox`: a shared file in ``/dev/shm``), which the process then
copies to its device. With :data:`DRAWS_VARIABLE` set to ``device`` it sends
how they were drawn instead (:func:`description`: the problem file, its sizes,
the value family, the two draws' seeds, the storage dtype and the device whose
generator drew them; a few hundred bytes), and the process draws them again
itself, on that device, with the judge's own code (:func:`regenerate`,
:func:`~.cases.case_tensors`): no input crosses the host on its way to the
candidate. On a machine without a GPU the same path draws by the CPU's
generator.

Both processes fingerprint what they drew, where it lies (:func:`fingerprint`:
exact integer sums over the bits, on the device), and the judge compares the
candidate's fingerprints with its own before it judges anything
(:func:`mismatch`). Inputs that differ (another seed, another generator, a
default dtype the candidate changed) stop the judgement, *not judged*, with the
input and the draw named: never a verdict on inputs the oracle did not see.

A fingerprint is, per tensor, its shape, its dtype and four sums over its bits
taken as words (32-bit words of 4- and 8-byte elements split into 16-bit halves,
16-bit elements as they are, narrower integers by value): each half summed plain
and weighted by the word's position modulo 32749 (a prime). The sums are of
integers, so they are the same on any device in any order of summation; a
different seed changes nearly every word, a shift or a transpose moves words to
other weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .cases import KBCase, case_tensors
from .problem import Problem, load_problem

__all__ = ["DRAWS_VARIABLE", "regenerates", "description", "regenerate", "fingerprint",
           "fingerprints", "mismatch"]

#: the environment variable whose value ``device`` has a judgement draw its inputs
#: where they are used: on a GPU by its generator, and in the candidate's process again
DRAWS_VARIABLE = "NUMORACLE_KERNELBENCH_DRAWS"
#: the weights' period (a prime below 2^15: a 16-bit half times a weight fits an int32)
#: and the words fingerprinted at a time (a multiple of it)
_PERIOD = 32749
_CHUNK = _PERIOD * 128


def regenerates(environ: Mapping[str, str]) -> bool:
    """Whether the candidate's process draws a case's inputs itself (``environ``'s
    :data:`DRAWS_VARIABLE` is ``device``) rather than receiving them."""
    return environ.get(DRAWS_VARIABLE, "host") == "device"


def description(problem: Problem, case: KBCase, base: Mapping[str, Any], *, dtype: str,
                device: str) -> dict[str, Any]:
    """How the judge drew ``case``'s two draws of the inputs (storage dtype ``dtype``
    by name, by ``device``'s generator, under torch's default dtype now): what
    :func:`regenerate` draws again."""
    return {"problem": str(problem.path.resolve()), "sizes": case.overrides(base),
            "family": case.family, "seed": case.seed, "dtype": dtype, "device": device,
            "default_dtype": str(torch.get_default_dtype()).removeprefix("torch.")}


#: problems loaded by :func:`regenerate`, by path (a candidate's process draws many cases)
_LOADED: dict[str, Problem] = {}


def regenerate(described: Mapping[str, Any], dtypes: Mapping[str, torch.dtype]
               ) -> tuple[list[Any], list[Any], dict[str, list[Any]]]:
    """The two draws :func:`description` describes, drawn again here by its device's
    generator (tensors left there) under the judge's default dtype and device, whatever
    defaults the candidate set here; and their fingerprints (``first``, ``second``).

    ``dtypes`` maps a dtype's name to torch's dtype.
    """
    path = described["problem"]
    if path not in _LOADED:
        _LOADED[path] = load_problem(Path(path))
    problem = _LOADED[path]
    case = KBCase(family=described["family"], seed=described["seed"])
    dtype = dtypes[described["dtype"]]
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtypes[described["default_dtype"]])
    try:
        with torch.device(described["device"]):  # whatever default device was set here
            drawn = [case_tensors(problem, case, described["sizes"], draw=d, dtype=dtype,
                                  device=described["device"]) for d in (1, 2)]
    finally:
        torch.set_default_dtype(default)
    return drawn[0], drawn[1], {"first": fingerprints(drawn[0]),
                                "second": fingerprints(drawn[1])}


def fingerprints(values: Sequence[Any]) -> list[Any]:
    """:func:`fingerprint` of each value."""
    return [fingerprint(v) for v in values]


def fingerprint(value: Any) -> tuple[Any, ...]:
    """A tensor's fingerprint (see the module docstring), computed where it lies; a
    value that is not a tensor (a Python scalar) by its ``repr``."""
    if not isinstance(value, torch.Tensor):
        return ("value", repr(value))
    t = value.detach()
    flat = t.reshape(-1)  # a view of a contiguous tensor (what a draw makes)
    size = t.element_size()
    if size in (4, 8):
        flat = flat.view(torch.int32)  # one or two words per element, no copy
    elif size == 2:
        flat = flat.view(torch.int16)
    weight = _weights(flat.device)
    sums = []
    for start in range(0, flat.numel(), _CHUNK):
        piece = flat[start:start + _CHUNK]
        if piece.numel() % _PERIOD:  # zeros to whole rows of the period: they add nothing
            piece = torch.cat([piece, piece.new_zeros(_PERIOD - piece.numel() % _PERIOD)])
        if piece.dtype == torch.int32:
            halves = [piece & 0xFFFF, (piece >> 16) & 0xFFFF]
        else:  # 16-bit words (their bits), or narrower integers and booleans (values)
            halves = [piece.to(torch.int32) & (0xFFFF if size == 2 else -1)]
        row = []
        for half in halves:
            # a position's weight is its column's: sums by column, exact in float64
            # (at most _CHUNK / _PERIOD halves below 2^16 each), then by weight in int64
            cols = half.view(-1, _PERIOD).double().sum(0).to(torch.int64)
            row += [cols.sum(), (cols * weight).sum()]
        if len(row) == 2:
            row += [torch.zeros((), dtype=torch.int64, device=piece.device)] * 2
        sums.append(torch.stack([row[0], row[2], row[1], row[3]]))
        del piece, halves
    total = [0, 0, 0, 0]
    if sums:  # exact: Python's integers add the pieces' sums
        for got in torch.stack(sums).tolist():
            total = [a + b for a, b in zip(total, got, strict=True)]
    return (tuple(value.shape), str(t.dtype).removeprefix("torch."), *total)


#: the weights of a row of the period, by device (made once per process and device)
_WEIGHTS: dict[str, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    """The weight of each position of a row of :data:`_PERIOD` words: 1, 2, ... ."""
    key = str(device)
    if key not in _WEIGHTS:
        _WEIGHTS[key] = torch.arange(1, _PERIOD + 1, dtype=torch.int64, device=device)
    return _WEIGHTS[key]


def mismatch(judge: Mapping[str, Sequence[Any]], candidate: Mapping[str, Sequence[Any]] | None,
             names: Sequence[str]) -> str | None:
    """Where the candidate's fingerprints (:func:`regenerate`) differ from the
    judge's, in a sentence; None where every input of both draws is the same."""
    if candidate is None:
        return ("the candidate's process told no fingerprint of the inputs it drew: "
                "whether it saw the judge's inputs is unknown")
    for draw in ("first", "second"):
        ours, theirs = list(judge[draw]), list(candidate.get(draw, ()))
        if len(ours) != len(theirs):
            return (f"the candidate's process drew {len(theirs)} inputs in the {draw} draw; "
                    f"the judge drew {len(ours)}")
        for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if tuple(a) != tuple(b):
                name = names[k] if k < len(names) else str(k)
                return (f"the candidate's process drew other inputs than the judge's: "
                        f"input {name!r} of the {draw} draw has fingerprint {tuple(b)}, the "
                        f"judge's {tuple(a)} (set {DRAWS_VARIABLE}=host to hand the inputs "
                        f"over instead)")
    return None
