"""Offline mode: a case set written for a program that cannot be driven, its
outputs judged afterwards (``numoracle cases`` and ``numoracle judge``).

:func:`write_cases` draws cases with the same strategies as a run (seeded:
the same set every time) and writes each into ``DIR/case_NNNN/`` as a command
target's case folder (inputs as ``NAME.npy``, ``manifest.json`` with the
expected outputs' files, shapes, layouts and dtype), plus ``DIR/manifest.json``
listing them with the claimed precision model. The foreign program writes each
output as ``NAME.npy`` into its case's folder; :func:`judge_folder` judges every
case with the full verdict and diagnosis (and the layout probe), and names the
smallest failing case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.case import Case
from ..cases.layouts import from_order, parse, to_order
from ..checking.check import judge
from ..checking.verdict import Verdict
from ..errors import InvalidArgument
from ..oracle.precision import PrecisionModel, get_model
from .command import read_outputs, write_case_folder
from .probe import layout_diagnosis
from .sharedlib import ForeignError
from .spec import ArgSpec, array_names, host_dtype

__all__ = ["write_cases", "judge_folder", "JudgeResult", "draw_cases"]


def draw_cases(op: str, storage: str, examples: int, seed: int,
               **overrides: Any) -> list[Case]:
    """``examples`` distinct cases drawn with the default strategies, seeded."""
    from hypothesis import HealthCheck, Phase, given, settings  # noqa: PLC0415
    from hypothesis import seed as hypothesis_seed  # noqa: PLC0415

    from ..strategies import FAMILY_ORDER, cases  # noqa: PLC0415

    kw: dict[str, Any] = {"op": op, "storage": storage, "families": FAMILY_ORDER,
                          "max_overlays": 2, "layouts": "C"}
    kw.update(overrides)
    strategy = cases(**kw)
    found: dict[str, Case] = {}

    @hypothesis_seed(seed)
    # Hypothesis may draw a case twice: draw more than asked and keep the first distinct ones
    @settings(max_examples=4 * examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case: Case) -> None:
        found.setdefault(case.to_json(), case)

    collect()
    return list(found.values())[:examples]


def _as_stored(arr: np.ndarray, spec: ArgSpec, name: str) -> np.ndarray:
    lay = parse(spec.layout(name), spec.axes(name))
    memory = lay.memory
    a = np.asarray(to_order(arr, spec.axes(name), lay.order)).astype(host_dtype(spec.dtype))
    return np.asfortranarray(a) if memory == "F" else np.ascontiguousarray(a)


def write_cases(out: Path | str, *, op: str, precision: str | PrecisionModel = "fp32",
                examples: int = 20, seed: int = 0, layouts: Mapping[str, str] | str | None = None,
                outputs: Sequence[str] | None = None, **overrides: Any) -> Path:
    """Write a reproducible case set into ``out``; returns the top-level manifest's path.

    Parameters
    ----------
    out : path
        Folder to write (created; must be empty or absent).
    op : str
        The op.
    precision : str or PrecisionModel
        The model the program claims (its storage format is the files' dtype).
    examples : int
        Cases to draw.
    seed : int
        Hypothesis seed: the same seed writes the same cases.
    layouts : mapping or str, optional
        Layout of each array, as for a command target.
    outputs : sequence of str, optional
        The outputs the program computes (default: all).
    **overrides
        Passed to :func:`numoracle.strategies.cases` (``max_elements=``...).
    """
    model = get_model(precision)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise InvalidArgument(f"examples={examples!r} must be a positive int, e.g. 20")
    folder = Path(out)
    if folder.exists() and any(folder.iterdir()):
        raise InvalidArgument(f"out={str(out)!r} is not empty; give a new folder")
    ins, outs = array_names(op)
    spec = ArgSpec.build(op, list(ins) + [o for o in outputs or outs if o not in ins],
                         precision=model,
                         layouts=layouts, check_dims=False)
    listed = []
    for i, case in enumerate(draw_cases(op, model.storage.name, examples, seed, **overrides)):
        sub = folder / f"case_{i:04d}"
        arrays = {k: _as_stored(v, spec, k) for k, v in case.inputs().items()}
        write_case_folder(sub, spec, case.params, arrays,
                          extra={"case": case.to_dict(), "describe": case.describe()})
        listed.append({"folder": sub.name, "describe": case.describe(), "size": case.size()})
    top = {"op": op, "precision": model.to_dict(), "spec": spec.to_dict(), "seed": seed,
           "cases": listed,
           "protocol": "write each output as NAME.npy into its case folder, shaped as "
                       "its manifest.json says; then run: numoracle judge DIR"}
    (folder / "manifest.json").write_text(json.dumps(top, indent=2) + "\n")
    return folder / "manifest.json"


@dataclass
class JudgeResult:
    """Every case's verdict, and the smallest failing one."""

    verdicts: list[tuple[str, Verdict]] = field(default_factory=list)
    smallest: tuple[str, Verdict] | None = None
    layout_note: str = ""

    @property
    def failures(self) -> int:
        return sum(not v.passed for _, v in self.verdicts)

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and self.failures == 0


def judge_folder(folder: Path | str, *, store: Path | str | None = None) -> JudgeResult:
    """Judge the outputs a program wrote into a case set from :func:`write_cases`.

    A case whose outputs are missing or malformed fails with that as its
    error. The smallest failing case (fewest input elements) gets the layout
    probe and, with ``store``, a repro (its recorded outputs, which
    ``numoracle replay`` judges again).
    """
    root = Path(folder)
    top_file = root / "manifest.json"
    if not top_file.is_file():
        raise InvalidArgument(f"{str(folder)!r} holds no manifest.json; give a folder written "
                              "by `numoracle cases`")
    top = json.loads(top_file.read_text())
    model = get_model(top["precision"])
    spec = ArgSpec(top["spec"]["op"], (), top["spec"]["dtype"], top["spec"]["layouts"])
    result = JudgeResult()
    for entry in top["cases"]:
        sub = root / entry["folder"]
        manifest = json.loads((sub / "manifest.json").read_text())
        case = Case.from_dict(manifest["case"])
        inputs = case.inputs()
        v = Verdict(case=case, target=f"offline:{root.name}", op=case.op,
                    precision=model.name, passed=False)
        try:
            raw = read_outputs(sub, manifest)
            got = {k: np.asarray(from_order(a.astype(np.float64), spec.axes(k),
                                            parse(spec.layout(k), spec.axes(k)).order))
                   for k, a in raw.items()}
            for k, a in got.items():
                want = _output_shapes(case)[k]
                if a.shape != want:
                    raise ForeignError(f"{k}.npy has shape {a.shape} in canonical order, "
                                       f"expected {want}")
        except ForeignError as exc:
            v.error = str(exc)
        else:
            v.got = got
            v.outputs = judge(case, model, inputs, got, with_diagnosis=True)
            v.passed = all(o.passed for o in v.outputs.values())
        result.verdicts.append((entry["folder"], v))
    failing = [(f, v) for f, v in result.verdicts if not v.passed]
    if failing:
        result.smallest = min(failing, key=lambda fv: fv[1].case.size())
        _f, v = result.smallest
        if v.got:
            result.layout_note = layout_diagnosis(
                v.case, model, v.case.inputs(), v.got,
                {n: spec.layout(n) for n in spec.layouts})
        if store is not None:
            _save(v, model, store)
    return result


def _output_shapes(case: Case) -> dict[str, tuple[int, ...]]:
    from ..oracle.ops import get_op  # noqa: PLC0415

    return get_op(case.op).output_shapes(case.params)


def _save(verdict: Verdict, model: PrecisionModel, store: Path | str) -> None:
    from ..targets.target import Target  # noqa: PLC0415
    from ..store.repro import save_repro  # noqa: PLC0415

    def offline(**_: Any) -> dict[str, Any]:
        raise ForeignError("an offline target cannot be called; its recorded outputs are judged")

    target = Target(name=verdict.target, op=verdict.op, backend="numpy", precision=model,
                    fn=offline, available=lambda: "offline outputs: judged as recorded")
    save_repro(verdict, target, store=store)
