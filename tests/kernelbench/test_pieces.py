"""An official instance above the float64 floor, judged whole in pieces of rows: every
row judged (the same ratios as a whole judgement), a wrong row anywhere caught, a
failing piece replayed alone, a model whose rows are not independent not so judged."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.kernelbench.candidates import official_how, write_candidate
from benchmarks.kernelbench.worker import classify
from numoracle.checking.verdict import ElementReport, OutputVerdict
from numoracle.errors import InvalidArgument
from numoracle.kernelbench.cases import KBCase, float64_bytes, reduced_sizes
from numoracle.kernelbench.judge import judge
from numoracle.kernelbench.pieces import merged, piece_rows, spans
from numoracle.kernelbench.problem import load_problem
from numoracle.kernelbench.sampling import row_plan, sample_rows

judge_module = sys.modules["numoracle.kernelbench.judge"]

#: a float64 floor the official instances of the problems below are above, a few of
#: their rows not
PIECES_BYTES = 4000
#: one that holds them whole
WHOLE_BYTES = 1 << 30

_ONE_ROW_WRONG = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right but for row {row} of the batch."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.relu(x)
        out[{row}] = out[{row}] * 0.5
        return out
'''


def run(problem: Path, candidate: Path, **kw: Any) -> Any:
    kw.setdefault("examples", 0)
    kw.setdefault("isolated", False)
    return judge(problem, candidate, **kw)


@pytest.mark.parametrize(("problem", "candidate"), [
    ("gemm_gelu", "gemm_gelu_correct"),
    ("softmax", "softmax_correct"),
])
def test_pieces_give_the_ratios_of_a_whole_judgement(problems: Path, candidates: Path,
                                                     problem: str, candidate: str) -> None:
    path, cand = problems / f"{problem}.py", candidates / f"{candidate}.py"
    pieces = run(path, cand, max_bytes=PIECES_BYTES)
    whole = run(path, cand, max_bytes=WHOLE_BYTES)
    assert pieces.status == "pass" and whole.status == "pass", (pieces.reason, whole.reason)
    first, stop, per = pieces.official.case.span
    assert (first, stop) == (0, 8) and per < 8  # every row, more than one piece
    assert not whole.official.case.span and not whole.official.case.rows
    assert any(f"whole, in {-(-8 // per)} pieces of {per} rows" in n for n in pieces.notes)
    assert official_how(pieces) == "pieces" and classify(
        {"status": pieces.status, "official_how": official_how(pieces)}) == "whole"
    for a, b in zip(pieces.official.outputs, whole.official.outputs, strict=True):
        assert a.shape == b.shape and a.mismatched == b.mismatched == 0
        assert a.worst_ratio == b.worst_ratio and a.worst_ratio > 0  # bit-identical bounds
        assert a.worst[0].index == b.worst[0].index


def test_a_wrong_middle_row_is_caught_in_pieces_and_missed_by_a_sample(
        problems: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "wide_relu.py"  # a batch of 64 rows: a sample of 8 misses most
    path.write_text((problems / "relu.py").read_text().replace("batch_size = 8",
                                                               "batch_size = 64"))
    prob = load_problem(path)
    plan = row_plan(prob, {}, reduced_sizes(prob, {}) or {}, PIECES_BYTES)
    assert plan is not None and plan.total == 64 and prob.knobs["dim"] == 32
    sampled = sample_rows(plan, 0)
    row = next(i for i in range(plan.total // 2, plan.total - 1) if i not in sampled)
    cand = tmp_path / "one_row_wrong.py"
    cand.write_text(_ONE_ROW_WRONG.format(row=row))
    bad = run(path, cand, max_bytes=PIECES_BYTES)
    assert bad.status == "fail" and bad.failing is bad.official, bad.reason
    assert f"32 of {64 * 32} elements outside the bound" in bad.reason
    assert f"worst at ({row}, " in bad.reason  # the whole output's coordinates
    i0, i1, per = bad.failing.case.span
    assert i0 <= row < i1 and per == i1 - i0 < 64  # the failing piece, a range of rows
    # its repro replays that piece alone
    again = run(path, cand, max_bytes=PIECES_BYTES,
                case=KBCase.from_json(bad.failing.case.to_json()))
    assert again.status == "fail" and again.failing.case.span == (i0, i1, per), again.reason
    assert any(f"whole, in 1 piece of {per} rows" in n for n in again.failing.notes)
    # the same instance on a sample of its rows: the wrong row is not among them
    monkeypatch.setattr(judge_module, "MAX_PIECES", 1)
    missed = run(path, cand, max_bytes=PIECES_BYTES)
    assert missed.official.case.rows == sampled and missed.status == "pass", missed.reason


def test_rows_that_share_batch_statistics_are_not_judged_in_pieces(
        problems: Path, candidates: Path) -> None:
    j = run(problems / "batchnorm.py", candidates / "batchnorm_correct.py", max_bytes=4096)
    assert j.status == "pass", j.reason
    assert not j.official.case.span and not j.official.case.rows
    assert any("cannot be judged on its rows" in n for n in j.notes)


def test_a_piece_the_oracle_has_no_memory_for_is_halved(
        problems: Path, candidates: Path, oracle_runs_out_once: list[int]) -> None:
    j = run(problems / "gemm_gelu.py", candidates / "gemm_gelu_correct.py",
            max_bytes=PIECES_BYTES)
    assert j.status == "pass", j.reason
    per = j.official.case.span[2]
    assert any(f"halved to {(per + 1) // 2} where the oracle ran out" in n
               for n in j.official.notes)
    assert j.official.outputs[0].shape == (8, 12)


def test_input_gradients_are_judged_in_pieces(problems: Path, candidates: Path,
                                              tmp_path: Path) -> None:
    path = problems / "gemm_gelu.py"
    good = run(path, candidates / "gemm_gelu_custom_backward.py", max_bytes=PIECES_BYTES)
    assert good.status == "pass" and "(outputs and gradients)" in good.reason, good.reason
    assert good.official.case.span
    grads = [o for o in good.official.outputs if o.name.startswith("grad ")]
    assert [(o.name, o.shape) for o in grads] == [("grad x", (8, 16))]
    halved = run(path, write_candidate(tmp_path, path, "grad_halved"),
                 max_bytes=PIECES_BYTES)
    assert halved.status == "fail" and halved.reason.startswith("grad x"), halved.reason


def _verdict(rows: int, worst: float, failing: int, at: tuple[int, ...]) -> OutputVerdict:
    report = ElementReport(at, 1.0, 2.0, 1.0, 1.0 / worst, worst, 1, 1.0)
    return OutputVerdict(name="out0", shape=(rows, 3), n=1, passed=failing == 0,
                         mismatched=failing, worst_ratio=worst, median_ratio=worst / 2,
                         worst_ratio_det=worst, worst_ratio_prob=worst / 4,
                         median_ratio_det=worst / 2, median_ratio_prob=worst / 8,
                         exact=False, worst=[report])


def test_pieces_merge_into_one_verdict_in_the_whole_outputs_coordinates() -> None:
    one = merged([(0, _verdict(4, 0.5, 0, (1, 2))), (4, _verdict(4, 3.0, 2, (2, 0))),
                  (8, _verdict(2, 0.25, 0, (0, 1)))])
    assert one.shape == (10, 3) and not one.passed and one.mismatched == 2
    assert one.worst_ratio == 3.0 and one.worst_ratio_prob == 0.75
    assert [w.index for w in one.worst] == [(6, 0), (1, 2), (8, 1)]
    assert one.median_ratio == 0.25  # the pieces' medians weighted by their elements
    assert spans(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]


def test_rows_per_piece_fill_the_floor_evenly(problems: Path) -> None:
    prob = load_problem(problems / "gemm_gelu.py")
    plan = row_plan(prob, {}, reduced_sizes(prob, {}) or {}, PIECES_BYTES)
    assert plan is not None
    per = piece_rows(prob, {}, plan, PIECES_BYTES)
    assert piece_rows(prob, {}, plan, WHOLE_BYTES) == 8
    most = max(k for k in range(1, 9) if float64_bytes(prob, {"batch_size": k}) <= PIECES_BYTES)
    assert per <= most < 8 and -(-8 // per) == -(-8 // most)  # as few pieces as fit


@pytest.mark.parametrize("span", [(0, 0, 1), (3, 2, 1), (0, 4, 0), (0, 4)])
def test_a_span_is_first_stop_and_rows_per_piece(span: tuple[int, ...]) -> None:
    with pytest.raises(InvalidArgument, match="span="):
        KBCase(span=span)
    case = KBCase(span=(2, 10, 4))
    assert KBCase.from_json(case.to_json()) == case
    assert "rows 2 to 9 judged, in 2 pieces of 4 rows" in case.describe()
