"""Check the WGSL examples through wgpu: a KAN layer forward and backward, and a
tiled matmul, with the mutants that seed 001 and a workgroup tail give.

    python examples/wgsl/check_wgsl.py kan [--mutant NAME] [--examples N] [--order K]
    python examples/wgsl/check_wgsl.py matmul [--mutant NAME] [--examples N]

Each mutant is a one-line edit of a correct shader (or of its binding spec or
dispatch rule, where the bug lives on the host):

* ``first_layer_input_grad_zero``: the network passes ``compute_input_grad =
  layer_idx > 0``, so the first (here: only) layer writes a zero input gradient;
* ``order2_derivative``: for spline order 2 the basis derivative takes the
  factor ``k - 1`` instead of ``k``;
* ``k_tail_dropped``: the matmul loops over ``k / 16`` tiles, dropping the
  partial tile at the end of the reduction (the workgroup tail);
* ``dispatch_floor``: the host dispatches ``floor(n / 16)`` workgroups, so the
  last partial column tile is never computed.

Runs on any adapter wgpu finds: Mesa's lavapipe (CPU Vulkan) here, the NVIDIA
Vulkan driver on a GPU machine.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from numoracle.targets.target import Target
from numoracle.foreign import run, wgsl_target
from numoracle.foreign.wgsl import adapter_description

HERE = Path(__file__).resolve().parent
KAN_SHADER = HERE / "kan_layer.wgsl"
MATMUL_SHADER = HERE / "matmul_tiled.wgsl"

#: the KAN layer's bindings: its arrays, then the uniform of dimensions and the
#: network's compute_input_grad flag (1: this layer's input gradient is needed)
KAN_UNIFORM = ["batch", "in_features", "out_features", "grid_size", "spline_order", "=1:int32"]
KAN_BINDINGS: list[Any] = ["x", "grid", "coef", "base_weight", "spline_weight", "grad_output",
                           "y", "grad_input", "grad_coef", "grad_base_weight",
                           "grad_spline_weight", KAN_UNIFORM]
KAN_PASSES = [("forward", "ceil(batch * out_features / 64)"),
              ("input_grad", "ceil(batch * in_features / 64)"),
              ("param_grad", "ceil(out_features * in_features / 64)")]
MATMUL_BINDINGS: list[Any] = ["a", "b", "out", ["prod(batch_shape)", "m", "k", "n"]]
MATMUL_DISPATCH = ("ceil(n / 16)", "ceil(m / 16)", "prod(batch_shape)")

#: mutant name -> (example, shader edit (old, new) or None, bindings, dispatch or passes)
MUTANTS: dict[str, tuple[str, tuple[str, str] | None, list[Any], Any]] = {
    "first_layer_input_grad_zero": (
        "kan", None, KAN_BINDINGS[:-1] + [KAN_UNIFORM[:-1] + ["=0:int32"]], KAN_PASSES),
    "order2_derivative": (
        "kan", ("let factor = f32(k);", "let factor = select(f32(k), f32(k) - 1.0, k == 2u);"),
        KAN_BINDINGS, KAN_PASSES),
    "k_tail_dropped": (
        "matmul", ("let tiles = (dims.k + TILE - 1u) / TILE;", "let tiles = dims.k / TILE;"),
        MATMUL_BINDINGS, MATMUL_DISPATCH),
    "dispatch_floor": (
        "matmul", None, MATMUL_BINDINGS, ("floor(n / 16)", "ceil(m / 16)", "prod(batch_shape)")),
}


def shader_text(example: str, edit: tuple[str, str] | None = None) -> str:
    """The example's shader source, with a mutant's one-line edit applied."""
    text = (KAN_SHADER if example == "kan" else MATMUL_SHADER).read_text()
    if edit is not None:
        old, new = edit
        if text.count(old) != 1:
            raise ValueError(f"the mutant's edit {old!r} must match the shader exactly once")
        text = text.replace(old, new)
    return text


def target(example: str, mutant: str | None = None, *, order: int | None = None,
           spec_dir: Path | str | None = None) -> Target:
    """The target of ``example`` (``kan`` or ``matmul``), or of one of its mutants;
    ``order`` fixes the KAN spline order (1 is drawn only this way)."""
    edit, bindings, rule = None, KAN_BINDINGS if example == "kan" else MATMUL_BINDINGS, None
    if mutant is not None:
        owner, edit, bindings, rule = MUTANTS[mutant]
        if owner != example:
            raise ValueError(f"mutant {mutant!r} belongs to the {owner} example")
    name = f"wgsl-{example}" + (f"-{mutant}" if mutant else "")
    params = {"spline_order": order} if order is not None else None
    if example == "kan":
        return wgsl_target(shader_text("kan", edit), op="kan", bindings=bindings,
                           passes=rule or KAN_PASSES, name=name, params=params,
                           spec_dir=spec_dir)
    return wgsl_target(shader_text("matmul", edit), op="matmul", bindings=bindings,
                       dispatch=rule or MATMUL_DISPATCH, name=name, spec_dir=spec_dir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("example", choices=("kan", "matmul"))
    ap.add_argument("--mutant", choices=sorted(MUTANTS))
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--order", type=int, default=None)
    args = ap.parse_args()
    print(f"adapter: {adapter_description()}")
    res = run(target(args.example, args.mutant, order=args.order), examples=args.examples)
    print(res.message or f"{res.target}: {res.verdict} on {res.cases} cases, "
          f"worst ratio {res.worst_ratio:.3g}")


if __name__ == "__main__":
    main()
