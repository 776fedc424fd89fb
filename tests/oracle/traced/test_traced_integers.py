"""Integer and boolean inputs of traced references: class labels, indices, masks.

Declared with ``integers={"labels": (0, "n")}`` (``booleans=("mask",)``), drawn
from the case's seed in ``[lo, hi)``, handed to kernels as int64 (bool) arrays,
kept integer in repros; cross-entropy, NLL, embedding and gather references
judge torch running them correctly and catch broken kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.traced.integers import class_nll, embedding, gather_rows, masked_sum
from numoracle import check_kernel
from numoracle.cases.case import Case
from numoracle.cli import main
from numoracle.errors import InvalidArgument, KernelMismatch
from numoracle.targets.backends import get_backend
from numoracle.kernels.torch_traced import reference_targets
from numoracle.oracle.ops import OPS, get_op
from numoracle.oracle.traced.op import TracedOp, traced_op
from numoracle.running.runner import run_target
from numoracle.zoo.traced import cross_entropy

CE = {"inputs": {"logits": ("batch", "n"), "labels": ("batch",)},
      "integers": {"labels": (0, "n")}, "grads": ("logits",), "dims": {"n": (2, 32)}}
NLL = {"inputs": {"log_p": ("batch", "n"), "labels": ("batch",)},
       "integers": {"labels": (0, "n")}, "grads": ("log_p",)}
EMB = {"inputs": {"weight": ("vocab", "d"), "idx": ("batch", "s")},
       "integers": {"idx": (0, "vocab")}, "grads": ("weight",),
       "dims": {"s": (1, 8), "d": (1, 16), "vocab": (1, 32)}}
GATHER = {"inputs": {"x": ("batch", "n"), "idx": ("batch", "k")},
          "integers": {"idx": (0, "n")}, "grads": ("x",)}


def _op(name: str, ref, spec) -> TracedOp:
    return traced_op(ref, name=name, **spec)


# -- torch running the reference is correct ----------------------------------------------

@pytest.mark.parametrize(("name", "ref", "spec", "targets"), [
    ("traced_int_ce", cross_entropy, CE, ("torch-cpu-fp32",)),
    ("traced_int_nll", class_nll, NLL, ("torch-cpu-fp32", "torch-cpu-bf16")),
    ("traced_int_embedding", embedding, EMB, ("torch-cpu-fp32", "torch-cpu-bf16")),
    ("traced_int_gather", gather_rows, GATHER, ("torch-cpu-fp32", "torch-cpu-bf16")),
], ids=lambda v: v if isinstance(v, str) else None)
def test_torch_running_the_reference_passes(name, ref, spec, targets):
    op = _op(name, ref, spec)
    for target in reference_targets(op.name):
        if target.name not in targets:
            continue
        result = run_target(target, examples=50, seed=0, store=None)
        assert result.verdict == "pass", result.message
        assert result.cases == 50 and 0 < result.worst_ratio < 1.0


# -- broken kernels are caught ------------------------------------------------------------

def _labels_off_by_one(logits, labels):
    n = logits.shape[1]
    return {"out": F.cross_entropy(logits, (labels + 1) % n, ignore_index=0),
            }


def _embedding_row_off_by_one(weight, idx):
    return {"out": F.embedding((idx + 1) % weight.shape[0], weight)}


def _gather_scatter_lost(x, idx, grad_out):
    # the backward writes each gradient instead of adding: repeated indices lose terms
    xx = x.detach().requires_grad_(True)
    out = torch.gather(xx, 1, idx)
    grad = torch.zeros_like(x)
    grad.scatter_(1, idx, grad_out)
    return {"out": out.detach(), "grad_x": grad}


@pytest.mark.parametrize(("kernel", "ref", "spec", "name"), [
    (_labels_off_by_one, cross_entropy, {k: v for k, v in CE.items() if k != "grads"},
     "traced_int_ce_fwd"),
    (_embedding_row_off_by_one, embedding, {k: v for k, v in EMB.items() if k != "grads"},
     "traced_int_emb_fwd"),
    (_gather_scatter_lost, gather_rows, GATHER, "traced_int_gather"),
], ids=["labels-off-by-one", "embedding-row-off-by-one", "gather-backward-overwrites"])
def test_a_broken_kernel_is_caught(kernel, ref, spec, name):
    with pytest.raises(KernelMismatch, match=name):
        check_kernel(kernel, reference=ref, op=name, backend="torch-cpu", examples=40,
                     store=None, **spec)


def test_kernels_get_integer_inputs_as_int64_tensors():
    seen = []

    def kernel(log_p, labels):
        seen.append((log_p.dtype, labels.dtype))
        return {"out": F.nll_loss(log_p, labels)}

    spec = {k: v for k, v in NLL.items() if k != "grads"}
    result = check_kernel(kernel, reference=class_nll, op="traced_int_nll_fwd",
                          backend="torch-cpu", examples=10, store=None, **spec)
    assert result.verdict == "pass"
    assert set(seen) == {(torch.float32, torch.int64)}


def test_a_repro_keeps_its_labels_integer_and_replays(tmp_path, monkeypatch):
    from numoracle.checking.replay import replay
    from numoracle.store.repro import load_repro

    spec = {k: v for k, v in CE.items() if k != "grads"}
    with pytest.raises(KernelMismatch):
        check_kernel(_labels_off_by_one, reference=cross_entropy, op="traced_int_ce_repro",
                     backend="torch-cpu", examples=40, store=tmp_path, **spec)
    folders = [p for p in tmp_path.iterdir() if (p / "repro.json").is_file()]
    assert len(folders) == 1
    with np.load(folders[0] / "arrays.npz") as z:
        assert z["input_labels"].dtype == np.int64
        assert z["input_logits"].dtype == np.float64
    monkeypatch.delitem(OPS, "traced_int_ce_repro")  # as a new process starts
    r = load_repro(folders[0])
    assert isinstance(get_op(r.op), TracedOp) and r.inputs["labels"].dtype == np.int64
    assert not replay(folders[0], rerun=False).passed


def test_given_arrays_with_labels_beyond_bf16_shrink():
    """Indices above 256 are not bf16 values: a case given from outside keeps them
    as they are, and shrinking never rounds them."""
    from numoracle.api import _make_target
    from numoracle.checking.shrink import shrink

    op = traced_op(embedding, name="traced_int_emb_bf16", inputs=EMB["inputs"],
                   integers=EMB["integers"], dims={"vocab": (1, 1000), "d": (1, 4)})
    target = _make_target(_embedding_row_off_by_one, op=op.name, precision="bf16",
                          backend="torch-cpu")
    rng = np.random.default_rng(0)
    weight = np.asarray(torch.tensor(rng.standard_normal((999, 2))).bfloat16().double())
    idx = np.array([[997, 301, 5]])
    res = shrink(target, op.name, {"vocab": 999, "d": 2, "batch": 1, "s": 3},
                 {"weight": weight, "idx": idx}, max_runs=200)
    assert not res.verdict.passed and res.after["s"] == 1 and res.after["vocab"] < 999
    left = res.inputs_after["idx"]
    assert np.array_equal(left, np.floor(left)) and 0 <= left.min() and left.max() < 999


# -- cases ------------------------------------------------------------------------------

def test_labels_are_drawn_from_the_seed_below_the_class_count():
    op = _op("traced_int_ce", cross_entropy, CE)
    a = Case(op.name, {"batch": 16, "n": 5}, seed=3).inputs()
    b = Case(op.name, {"batch": 16, "n": 5}, seed=3).inputs()
    assert a["labels"].dtype == np.int64 and np.array_equal(a["labels"], b["labels"])
    assert a["labels"].min() >= 0 and a["labels"].max() < 5
    assert len(np.unique(Case(op.name, {"batch": 16, "n": 5}, seed=4).inputs()["labels"])
               ) > 1
    # fewer classes, same seed: every label still below the count, none moved up
    small = Case(op.name, {"batch": 16, "n": 2}, seed=3).inputs()["labels"]
    assert small.max() < 2 and np.all(small <= a["labels"])


@pytest.mark.parametrize("family", ["exact", "heavy", "special"])
def test_no_family_rounds_or_overlays_an_integer_input(family):
    op = traced_op(embedding, name="traced_int_big_vocab", inputs=EMB["inputs"],
                   integers=EMB["integers"], dims={"vocab": (600, 1000), "d": (1, 2)})
    params = {"vocab": 1000, "d": 1, "batch": 16, "s": 8}
    idx = Case(op.name, params, storage="bf16", family=family, seed=1).inputs()["idx"]
    assert idx.dtype == np.int64 and 0 <= idx.min() and idx.max() < 1000
    assert np.any(idx % 8 != 0) and idx.max() > 256  # bf16 would have rounded these
    with pytest.raises(InvalidArgument, match="integer input"):
        Case(op.name, params, overlays=(("idx", 0, float("nan")),))


def test_booleans_are_masks():
    op = traced_op(masked_sum, inputs={"x": ("batch", "n"), "mask": ("batch", "n")},
                   booleans=("mask",), name="traced_int_masked_sum")
    mask = Case(op.name, {"batch": 8, "n": 16}, seed=0).inputs()["mask"]
    assert mask.dtype == np.bool_ and mask.any() and not mask.all()

    def kernel(x, mask):  # not (x * mask): an Inf or NaN where the mask is off would leak
        assert mask.dtype == torch.bool
        return {"out": torch.where(mask, x, torch.zeros((), dtype=x.dtype)).sum(-1)}
    assert check_kernel(kernel, reference=masked_sum, op=op.name, backend="torch-cpu",
                        inputs=op.declared, booleans=("mask",), examples=10,
                        store=None).verdict == "pass"


def test_integer_example_tensors_are_integer_inputs():
    op = TracedOp(cross_entropy, inputs=[torch.randn(4, 10), torch.tensor([1, 3, 9, 2])],
                  name="traced_int_examples")
    spec = op.integer_inputs({})["labels"]
    assert (spec.lo, spec.hi, spec.dtype) == (1, 10, "int64")
    assert not op.integer_inputs({}).keys() - {"labels"}
    masks = TracedOp(masked_sum, inputs={"x": torch.randn(2, 3),
                                         "mask": torch.ones(2, 3, dtype=torch.bool)})
    assert masks.integer_inputs({})["mask"].dtype == "bool"


def test_the_spec_keeps_the_integer_inputs():
    op = _op("traced_int_ce", cross_entropy, CE)
    spec = op.spec()
    assert spec is not None and spec["integers"] == {"labels": [0, "n"]}
    again = TracedOp.from_spec(spec)
    assert again.spec() == spec
    assert again.integer_inputs({"batch": 2, "n": 9})["labels"].hi == 9
    # an op without integer inputs has the spec it had before they existed
    # (not registered: a float index cannot run, and registered ops are listed)
    plain = TracedOp(gather_rows, inputs=GATHER["inputs"], name="traced_int_float_idx").spec()
    assert plain is not None and "integers" not in plain and "booleans" not in plain


@pytest.mark.parametrize("layout", ["C", "F", "T", "S"])
def test_integer_inputs_take_every_layout(layout):
    host = np.arange(12, dtype=np.int64).reshape(3, 4)
    t = get_backend("torch-cpu").to_device_integers(host, "int64", layout)
    assert t.dtype == torch.int64 and np.array_equal(t.numpy(), host)
    if layout == "S":
        assert int(t.as_strided((3, 8), (8, 1)).min()) == np.iinfo(np.int64).min
    with pytest.raises(InvalidArgument, match="not all int64"):
        get_backend("numpy").to_device_integers(host + 0.5, "int64", layout)


# -- bad declarations ---------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "match"), [
    ({"integers": {"label": (0, "n")}}, "not a declared input"),
    ({"integers": {"labels": (0, "m")}}, "no dimension"),
    ({"integers": {"labels": (0,)}}, r"must be \(lo, hi\)"),
    ({"integers": {"labels": (0.5, 3)}}, "an int or a dimension name"),
    ({"integers": ["labels"]}, "must map input names"),
    ({"integers": {"labels": (1, "n")}}, r"empty when n=1.*dims=\{'n': \(2, 64\)\}"),
    ({"integers": {"labels": (5, 5)}}, "empty"),
    ({"integers": {"labels": (0, "n")}, "grads": ("labels",)}, "drop 'labels' from grads"),
    ({"booleans": "labels"}, "tuple of input names"),
    ({"integers": {"labels": (0, 2)}, "booleans": ("labels",)}, "both integers= and"),
])
def test_bad_declarations_say_how_to_fix_them(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        TracedOp(cross_entropy, inputs={"logits": ("batch", "n"), "labels": ("batch",)},
                 **kwargs)


def test_foreign_targets_refuse_integer_inputs(tmp_path):
    from numoracle.foreign import write_cases

    op = _op("traced_int_ce", cross_entropy, CE)
    with pytest.raises(InvalidArgument, match="integer inputs"):
        write_cases(tmp_path / "cases", op=op.name, examples=2)


def test_the_command_line_takes_integer_inputs(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["run", "--reference", "torch.nn.functional:nll_loss",
                 "--inputs", "input=batch,n;target=batch", "--dims", "n=2:16",
                 "--integers", "target=0:n", "--examples", "8", "--budget", "300",
                 "--store", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "traced_nll_loss" in out and "torch-cpu-bf16" in out
    code = main(["run", "--reference", "torch.nn.functional:nll_loss",
                 "--inputs", "input=batch,n;target=batch", "--integers", "target"])
    assert code != 0 and "NAME=LO:HI" in capsys.readouterr().err
