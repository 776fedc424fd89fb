"""References with integer inputs (class labels, token ids, gather indices, masks)
judged by the traced oracle: torch running each of them on drawn cases (every
alarm a false alarm of the oracle or torch outside its claim), and kernels with
one index bug each (cases until caught, the shrunk case).

:func:`integers` writes ``integers.json`` and ``integers.md``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.record import meta, write_json, write_text

__all__ = ["REFERENCES", "MUTANTS", "integers", "class_nll", "embedding", "gather_rows",
           "index_rows", "masked_sum", "cross_entropy"]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over class labels."""
    return F.cross_entropy(logits, labels)


def class_nll(log_p: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of class labels."""
    return F.nll_loss(log_p, labels)


def embedding(weight: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows of ``weight`` looked up by token id."""
    return F.embedding(idx, weight)


def gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x[b, idx[b, k]]``."""
    return torch.gather(x, 1, idx)


def index_rows(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """``2 x[i]``: rows picked by an index tensor."""
    return x[i] * 2.0


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The sum of each row over the elements the mask keeps."""
    return torch.where(mask, x, 0.0).sum(-1)


_ROWS_LABELS = {"inputs": {"logits": ("batch", "n"), "labels": ("batch",)},
                "integers": {"labels": (0, "n")}, "dims": {"n": (2, 64)}}

#: name -> (reference, TracedOp keyword arguments); every one with its gradients
REFERENCES: dict[str, tuple[Callable[..., torch.Tensor], dict[str, Any]]] = {
    "cross_entropy": (cross_entropy, {**_ROWS_LABELS, "grads": ("logits",)}),
    "nll_loss": (class_nll, {"inputs": {"log_p": ("batch", "n"), "labels": ("batch",)},
                             "integers": {"labels": (0, "n")}, "grads": ("log_p",)}),
    "embedding": (embedding, {"inputs": {"weight": ("vocab", "d"), "idx": ("batch", "s")},
                              "integers": {"idx": (0, "vocab")}, "grads": ("weight",),
                              "dims": {"vocab": (1, 512), "s": (1, 16)}}),
    "gather": (gather_rows, {"inputs": {"x": ("batch", "n"), "idx": ("batch", "k")},
                             "integers": {"idx": (0, "n")}, "grads": ("x",)}),
    "index": (index_rows, {"inputs": {"x": ("n", "d"), "i": ("k",)},
                           "integers": {"i": (0, "n")}, "grads": ("x",)}),
    "masked_sum": (masked_sum, {"inputs": {"x": ("batch", "n"), "mask": ("batch", "n")},
                                "booleans": ("mask",), "grads": ("x",)}),
}


def _labels_off_by_one(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"out": F.cross_entropy(logits, (labels + 1) % logits.shape[1])}


def _mean_over_batch_with_ignored(logits: torch.Tensor,
                                  labels: torch.Tensor) -> dict[str, torch.Tensor]:
    picked = -torch.log_softmax(logits, -1).gather(1, labels[:, None])[:, 0]
    return {"out": torch.where(labels != 0, picked, 0.0).sum() / labels.shape[0]}


def _ignore_index_0(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels, ignore_index=0)


def _embedding_row_off_by_one(weight: torch.Tensor, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"out": F.embedding((idx + 1) % weight.shape[0], weight)}


def _gather_backward_overwrites(x: torch.Tensor, idx: torch.Tensor,
                                grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    grad = torch.zeros_like(x)
    grad.scatter_(1, idx, grad_out)
    return {"out": torch.gather(x, 1, idx), "grad_x": grad}


#: name -> (broken kernel, reference, TracedOp keyword arguments)
MUTANTS: dict[str, tuple[Callable[..., Any], Callable[..., torch.Tensor], dict[str, Any]]] = {
    "cross_entropy_labels_off_by_one": (_labels_off_by_one, cross_entropy, _ROWS_LABELS),
    "cross_entropy_mean_counts_ignored": (_mean_over_batch_with_ignored, _ignore_index_0,
                                          _ROWS_LABELS),
    "embedding_row_off_by_one": (_embedding_row_off_by_one, embedding,
                                 {k: v for k, v in REFERENCES["embedding"][1].items()
                                  if k != "grads"}),
    "gather_backward_overwrites": (_gather_backward_overwrites, gather_rows,
                                   REFERENCES["gather"][1]),
}


def _reference_row(name: str, target_name: str, examples: int, seed: int) -> dict[str, Any]:
    from numoracle.kernels.torch_traced import reference_targets  # noqa: PLC0415
    from numoracle.oracle.traced.op import traced_op  # noqa: PLC0415
    from numoracle.running.runner import run_target  # noqa: PLC0415

    ref, kwargs = REFERENCES[name]
    op = traced_op(ref, name=f"integers_{name}", **kwargs)
    target = next(t for t in reference_targets(op.name) if t.name == target_name)
    row: dict[str, Any] = {"reference": name, "target": target_name, "examples": examples}
    reason = target.unavailable_reason()
    if reason is not None:
        return {**row, "status": f"skipped: {reason}"}
    start = time.perf_counter()
    r = run_target(target, examples=examples, seed=seed, store=None)
    return {**row, "status": r.verdict, "cases": r.cases, "alarms": r.failures,
            "cases_to_alarm": r.cases_to_catch, "shrunk": r.repro_shape,
            "worst_ratio": r.worst_ratio, "seconds": round(time.perf_counter() - start, 2),
            "first_alarm": (r.message or "")[:1500] if r.failures else ""}


def _mutant_row(name: str, examples: int, seed: int) -> dict[str, Any]:
    from numoracle.api import _make_target  # noqa: PLC0415
    from numoracle.oracle.traced.op import traced_op  # noqa: PLC0415
    from numoracle.running.runner import run_target  # noqa: PLC0415

    kernel, ref, kwargs = MUTANTS[name]
    op = traced_op(ref, name=f"integers_mutant_{name}", **kwargs)
    target = _make_target(kernel, op=op.name, precision="fp32", backend="torch-cpu",
                          name=name)
    r = run_target(target, examples=examples, seed=seed, store=None)
    return {"mutant": name, "caught": r.failures > 0, "cases": r.cases,
            "cases_to_catch": r.cases_to_catch, "shrunk": r.repro_shape,
            "diagnosis": r.diagnosis}


def _ratio(x: float | None) -> str:
    """A ratio to four decimals, cut (not rounded) so that one below 1 never reads 1."""
    if x is None:
        return "-"
    return f"{math.floor(x * 1e4) / 1e4:.4f}" if math.isfinite(x) else str(x)


def _table(rows: list[dict[str, Any]], mutants: list[dict[str, Any]], command: str) -> str:
    lines = ["# Integer inputs of traced references", "", f"`{command}`", "",
             "| reference | target | status | cases | alarms | worst ratio | seconds |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['reference']} | {r['target']} | {r['status'][:60]} | "
                     f"{r.get('cases', '-')} | {r.get('alarms', '-')} | "
                     f"{_ratio(r.get('worst_ratio'))} | {r.get('seconds', '-')} |")
    lines += ["", "| mutant | caught | cases to catch | shrunk inputs |", "|---|---|---:|---|"]
    for m in mutants:
        lines.append(f"| {m['mutant']} | {m['caught']} | {m['cases_to_catch']} | "
                     f"{m['shrunk']} |")
    alarms = [r for r in rows if r.get("alarms")]
    if alarms:
        lines += ["", "## First alarms", ""]
        for r in alarms:
            lines += [f"### {r['reference']} on {r['target']}", "", "```",
                      r["first_alarm"], "```", ""]
    return "\n".join(lines) + "\n"


def integers(examples: int, targets: list[str], mutant_examples: int, seed: int, out: Path,
             argv: list[str]) -> int:
    """Run every reference on every target and every mutant; write the results under
    ``out``; 0 when torch passed everywhere it ran and every mutant was caught."""
    rows, mutants = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in REFERENCES:
            for target in targets:
                rows.append(_reference_row(name, target, examples, seed))
                print(rows[-1]["reference"], rows[-1]["target"], rows[-1]["status"][:80],
                      rows[-1].get("worst_ratio"), flush=True)
        for name in MUTANTS:
            mutants.append(_mutant_row(name, mutant_examples, seed))
            print(name, mutants[-1]["caught"], flush=True)
    record = meta(argv)
    write_json(out / "integers.json", {"meta": record, "references": rows, "mutants": mutants})
    write_text(out / "integers.md", _table(rows, mutants, record["command"]))
    ok = all(r["status"] in ("pass",) or r["status"].startswith("skipped") for r in rows)
    return 0 if ok and all(m["caught"] for m in mutants) else 1
