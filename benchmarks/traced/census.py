"""Coverage census of the traced oracle's rule library.

Traces every problem file ``KERNELBENCH_DIR/level1/*.py`` and ``level2/*.py`` (a
``Model`` class, ``get_inputs()`` and ``get_init_inputs()``) to ATen with the
decomposition table the traced oracle captures with, under a fake tensor mode
(shapes only: no problem's arrays are allocated, so full-size problems trace in
a second), and a set of composite references written here (the seed CNN's layers,
layer norm, attention, the losses, the activations). For each it lists the
distinct ATen ops of the forward graph and of the backward graph of
``torch.func.vjp`` with respect to every floating input and parameter, and
whether the rule table (:data:`numoracle.oracle.traced.RULES`, with the library
imported) has a rule for each. :func:`census` writes ``coverage.json`` and
``coverage.md``.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_map

import numoracle.oracle.traced.library  # noqa: F401  (registers the rules)
from benchmarks.record import command_line
from numoracle.oracle.precision import get_model
from numoracle.oracle.traced import RULES
from numoracle.oracle.traced.op import TracedOp

__all__ = ["census", "census_composites", "census_problem", "decomposition_table", "trace_ops"]


def decomposition_table() -> dict[Any, Any]:
    """The capture's table (``numoracle.oracle.traced.capture``) where it exists;
    else torch's core ATen decompositions minus the ops the library keeps."""
    try:
        from numoracle.oracle.traced import capture  # noqa: PLC0415
        return dict(capture.decomposition_table())
    except (ImportError, AttributeError):
        pass
    from torch._decomp import core_aten_decompositions  # noqa: PLC0415
    aten = torch.ops.aten
    keep = {aten.mm, aten.addmm, aten.bmm, aten.convolution, aten.convolution_backward,
            aten._softmax, aten._log_softmax, aten._softmax_backward_data,
            aten._log_softmax_backward_data, aten.logsumexp, aten.native_layer_norm,
            aten.native_layer_norm_backward, aten.native_group_norm,
            aten.native_group_norm_backward, aten.native_batch_norm,
            aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
            aten._native_batch_norm_legit_no_training, aten.sum, aten.mean, aten.cumsum,
            aten.max_pool2d_with_indices, aten.max_pool3d_with_indices, aten.avg_pool2d,
            aten.avg_pool3d, aten.nll_loss_forward, aten.nll_loss_backward}
    return {k: v for k, v in core_aten_decompositions().items()
            if k.overloadpacket not in keep}


def trace_ops(model: Callable[..., Any], params: dict[str, torch.Tensor],
              inputs: tuple[Any, ...], table: dict[Any, Any], grads: bool) -> list[str]:
    """The distinct ATen ops of ``model(*inputs)`` (and of its VJP with ``grads``)."""
    def fwd(p: dict[str, torch.Tensor], *x: Any) -> Any:
        if isinstance(model, torch.nn.Module):
            return torch.func.functional_call(model, p, x)
        return model(*x)

    def bwd(p: dict[str, torch.Tensor], *x: Any) -> Any:
        wrt_p = {k: v for k, v in p.items() if v.is_floating_point()}
        pos = [i for i, v in enumerate(x) if isinstance(v, torch.Tensor) and v.is_floating_point()]

        def g(pd: dict[str, torch.Tensor], *xs: torch.Tensor) -> Any:
            full = list(x)
            for i, v in zip(pos, xs, strict=True):
                full[i] = v
            return fwd({**p, **pd}, *full)
        out, vjp = torch.func.vjp(g, wrt_p, *(x[i] for i in pos))  # type: ignore[misc]
        return vjp(tree_map(torch.ones_like, out))

    ops: set[str] = set()
    fns = [fwd] + ([bwd] if grads else [])
    for fn in fns:
        gm = make_fx(torch.func.functionalize(fn), tracing_mode="real",
                     decomposition_table=table)(params, *inputs)
        ops |= {str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                and str(n.target).startswith("aten.")}
    return sorted(ops)


def load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"problem_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def census_problem(path: Path, table: dict[Any, Any], grads: bool) -> dict[str, Any]:
    mod = load(path)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = mod.Model(*mod.get_init_inputs())
        inputs = tuple(mod.get_inputs())
        params = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        fwd = trace_ops(model, params, inputs, table, grads=False)
        rec: dict[str, Any] = {"forward": fwd, "backward": [], "backward_error": "not traced"}
        if grads:
            try:
                rec["backward"] = trace_ops(model, params, inputs, table, grads=True)
                rec["backward_error"] = None
            except Exception as e:  # noqa: BLE001 - a census records why a trace fails
                rec["backward_error"] = f"{type(e).__name__}: {str(e)[:160]}"
    return rec


# -- composite references of our own ------------------------------------------------

def _cnn_layers() -> dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]]:
    r = torch.randn
    refs: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
        "seed CNN: conv2d+bias": (lambda x, w, b: F.conv2d(x, w, b, padding=1),
                                  lambda: (r(4, 3, 16, 16), r(8, 3, 3, 3), r(8))),
        "seed CNN: relu": (F.relu, lambda: (r(4, 8, 16, 16),)),
        "seed CNN: max_pool2d": (lambda x: F.max_pool2d(x, 2), lambda: (r(4, 8, 16, 16),)),
        "seed CNN: linear": (F.linear, lambda: (r(4, 512), r(10, 512), r(10))),
        "seed CNN: softmax cross-entropy": (F.cross_entropy,
                                            lambda: (r(4, 10), torch.randint(0, 10, (4,)))),
        "seed CNN: whole": (
            lambda x, w, b, lw, lb, t: F.cross_entropy(F.linear(F.max_pool2d(F.relu(
                F.conv2d(x, w, b, padding=1)), 2).flatten(1), lw, lb), t),
            lambda: (r(4, 3, 8, 8), r(8, 3, 3, 3), r(8), r(10, 128), r(10),
                     torch.randint(0, 10, (4,)))),
        "layer norm": (lambda x, w, b: F.layer_norm(x, (64,), w, b),
                       lambda: (r(8, 64), r(64), r(64))),
        "group norm": (lambda x, w, b: F.group_norm(x, 4, w, b),
                       lambda: (r(4, 16, 8, 8), r(16), r(16))),
        "batch norm (training)": (lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
                                  lambda: (r(4, 16, 8, 8), r(16), r(16))),
        "attention (sdpa math)": (
            lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) / 8.0, -1) @ v,
            lambda: (r(2, 4, 16, 64), r(2, 4, 16, 64), r(2, 4, 16, 64))),
        "attention (F.scaled_dot_product_attention)": (
            F.scaled_dot_product_attention,
            lambda: (r(2, 4, 16, 64), r(2, 4, 16, 64), r(2, 4, 16, 64))),
        "mse loss": (F.mse_loss, lambda: (r(8, 16), r(8, 16))),
        "l1 loss": (F.l1_loss, lambda: (r(8, 16), r(8, 16))),
        "smooth l1 loss": (F.smooth_l1_loss, lambda: (r(8, 16), r(8, 16))),
        "huber loss": (F.huber_loss, lambda: (r(8, 16), r(8, 16))),
        "kl div": (lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                   lambda: (r(8, 16).log_softmax(-1), r(8, 16).softmax(-1))),
        "binary cross-entropy": (F.binary_cross_entropy,
                                 lambda: (torch.rand(8, 16) * 0.9 + 0.05, torch.rand(8, 16))),
        "bce with logits": (F.binary_cross_entropy_with_logits,
                            lambda: (r(8, 16), torch.rand(8, 16))),
        "nll loss": (F.nll_loss, lambda: (r(8, 10).log_softmax(-1),
                                          torch.randint(0, 10, (8,)))),
        "cosine similarity loss": (lambda a, b: 1 - F.cosine_similarity(a, b).mean(),
                                   lambda: (r(8, 16), r(8, 16))),
    }
    for name, fn in (("relu", F.relu), ("gelu (erf)", F.gelu),
                     ("gelu (tanh)", lambda x: F.gelu(x, approximate="tanh")),
                     ("silu", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                     ("softplus", F.softplus), ("elu", F.elu), ("selu", F.selu),
                     ("leaky relu", F.leaky_relu), ("hardtanh", F.hardtanh),
                     ("hardsigmoid", F.hardsigmoid), ("hardswish", F.hardswish),
                     ("mish", F.mish), ("softsign", F.softsign),
                     ("log_softmax", lambda x: F.log_softmax(x, -1)),
                     ("softmax", lambda x: F.softmax(x, -1))):
        refs[f"activation: {name}"] = (fn, lambda: (r(8, 16),))
    return refs


def judge(name: str, fn: Callable[..., Any], inputs: tuple[Any, ...]) -> dict[str, Any]:
    """Evaluate the traced oracle on ``inputs`` (float32 values) and judge torch's
    float32 result by it: the worst ``|got - ref| / bound`` over every output."""
    op = TracedOp(fn, inputs=list(inputs), name=f"census_{abs(hash(name))}")
    names = list(op.input_shapes({}))
    arrays = {n: (t.double().numpy() if t.is_floating_point() else t.numpy())
              for n, t in zip(names, inputs, strict=True)}
    ref = op.reference(arrays, {}, get_model("fp32"))
    with torch.no_grad():
        got = fn(*inputs)
    outs = {"out": got} if isinstance(got, torch.Tensor) else {
        f"out{i}": g for i, g in enumerate(got)}
    worst, judged, exact_outputs = 0.0, 0, 0
    for key, t in ref.items():
        k = outs[key].double().numpy()
        bound = t.det + t.ref_err
        with np.errstate(invalid="ignore", divide="ignore"):
            err = np.abs(k - (t.value + (0.0 if t.lo is None else t.lo)))
            ok = np.isfinite(bound)
            ratio = np.where(err == 0, 0.0, err / bound)[ok]
        judged += int(ok.sum())
        exact_outputs += int(t.is_exact)
        worst = max(worst, float(ratio.max()) if ratio.size else 0.0)
    return {"worst_ratio": worst, "judged_elements": judged, "exact_outputs": exact_outputs}


def census_composites(table: dict[Any, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, (fn, make) in _cnn_layers().items():
        inputs = make()
        rec: dict[str, Any] = {"forward": trace_ops(fn, {}, inputs, table, grads=False)}
        try:
            rec["backward"] = trace_ops(fn, {}, inputs, table, grads=True)
            rec["backward_error"] = None
        except Exception as e:  # noqa: BLE001
            rec["backward"], rec["backward_error"] = [], f"{type(e).__name__}: {str(e)[:160]}"
        try:
            rec["judged"] = judge(name, fn, inputs)
        except Exception as e:  # noqa: BLE001 - recorded: a reference the oracle refuses
            rec["judged"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        out[name] = rec
    return out


# -- the report ----------------------------------------------------------------------

def summarise(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    freq_f: collections.Counter[str] = collections.Counter()
    freq_b: collections.Counter[str] = collections.Counter()
    covered_f = covered_fb = traced = 0
    for rec in records.values():
        if "error" in rec:
            continue
        traced += 1
        freq_f.update(rec["forward"])
        freq_b.update(rec["backward"])
        rec["missing_forward"] = [o for o in rec["forward"] if o not in RULES]
        rec["missing_backward"] = [o for o in rec["backward"] if o not in RULES]
        if not rec["missing_forward"]:
            covered_f += 1
            if rec.get("backward_error") is None and not rec["missing_backward"]:
                covered_fb += 1
    with_bwd = sum(1 for r in records.values() if r.get("backward_error") != "not traced"
                   and "error" not in r)
    return {"problems": len(records), "traced": traced, "backward_traced": with_bwd,
            "forward_covered": covered_f,
            "forward_and_backward_covered": covered_fb,
            "forward_ops": {o: freq_f[o] for o in sorted(freq_f, key=lambda o: -freq_f[o])},
            "backward_ops": {o: freq_b[o] for o in sorted(freq_b, key=lambda o: -freq_b[o])}}


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Traced oracle: rule coverage census", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}  ",
             f"torch {result['torch']}; {len(result['rules'])} ATen overloads have rules.", ""]
    for part in ("kernelbench", "composites"):
        s = result[part]["summary"]
        lines += [f"## {part}", "",
                  f"{s['traced']} of {s['problems']} traced; forward fully covered: "
                  f"**{s['forward_covered']}**; "
                  + (f"forward and backward fully covered: "
                     f"**{s['forward_and_backward_covered']}** (backward graphs traced: "
                     f"{s['backward_traced']})." if s["backward_traced"] else
                     "backward graphs not traced (`--grads`)."), "",
                  "| ATen op (forward) | problems | rule |", "|---|---|---|"]
        lines += [f"| `{o}` | {n} | {'yes' if o in RULES else '**no**'} |"
                  for o, n in s["forward_ops"].items()]
        lines += ["", "| ATen op (backward only) | problems | rule |", "|---|---|---|"]
        lines += [f"| `{o}` | {n} | {'yes' if o in RULES else '**no**'} |"
                  for o, n in s["backward_ops"].items() if o not in s["forward_ops"]]
        lines += ["", "| reference | missing (forward) | missing (backward) | torch fp32 judged: "
                  "worst err/bound |", "|---|---|---|---|"]
        for name, rec in result[part]["records"].items():
            if "error" in rec:
                lines.append(f"| {name} | trace failed: {rec['error'][:80]} | | |")
                continue
            mf = ", ".join(f"`{o}`" for o in rec["missing_forward"]) or "-"
            mb = ", ".join(f"`{o}`" for o in rec["missing_backward"]) or (
                "-" if rec.get("backward_error") is None else "no backward graph")
            j = rec.get("judged")
            jt = "" if j is None else (j["error"][:80] if "error" in j else
                                       f"{j['worst_ratio']:.3g} ({j['judged_elements']} elements)")
            lines.append(f"| {name} | {mf} | {mb} | {jt} |")
        lines.append("")
    return "\n".join(lines)


def census(kernelbench: Path, out: Path, levels: str, grads: bool,
           argv: Sequence[str]) -> int:
    """Trace every problem of ``kernelbench``'s ``levels`` and the composite references;
    write ``coverage.json`` and ``coverage.md`` to ``out``."""
    table = decomposition_table()
    t0 = time.perf_counter()
    kb: dict[str, dict[str, Any]] = {}
    torch.manual_seed(0)
    for level in filter(None, levels.split(",")):
        for path in sorted((kernelbench / level).glob("*.py"),
                           key=lambda p: int(p.stem.split("_")[0])):
            try:
                kb[f"{level}/{path.stem}"] = census_problem(path, table, grads)
            except Exception as e:  # noqa: BLE001
                kb[f"{level}/{path.stem}"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    comp = census_composites(table)
    result: dict[str, Any] = {
        "command": command_line([a if not a.startswith("/") else "KERNELBENCH_DIR"
                                 for a in argv]),
        "machine": f"{platform.machine()} {platform.system()}, CPU, python "
                   f"{platform.python_version()}",
        "torch": torch.__version__, "seconds": round(time.perf_counter() - t0, 1),
        "rules": sorted(RULES), "backward_traced": bool(grads),
        "kernelbench": {"summary": summarise(kb), "records": kb},
        "composites": {"summary": summarise(comp), "records": comp},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "coverage.md").write_text(markdown(result))
    for part in ("kernelbench", "composites"):
        s = result[part]["summary"]
        print(part, {k: s[k] for k in ("problems", "traced", "forward_covered",
                                        "forward_and_backward_covered")})
    return 0
