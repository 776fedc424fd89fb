"""KernelBench candidates written from a problem's own ``Model``, and the survey
plumbing the soundness and mutant benchmarks share.

A candidate is a KernelBench file whose ``ModelNew`` subclasses the problem's
``Model``: unchanged (``model``, a correct candidate that must pass) or with one
bug (a mutant: zeros, a constant, bfloat16 claimed as float32, strides ignored,
a dropped tail, an input mutated, a cached result, a race: on CUDA the result is
computed on a side stream and copied out on the main stream, which never waits
for it), or, with a right forward, a wrong backward (``grad_halved``: every
gradient halved by an autograd Function of its own; ``input_grad_dropped``: the
first input's gradient zero, by a Function whose backward drops it; judged with
``backward=True``). The
problems are taken in
the order of their level and number; a problem counts as judged when the
traced oracle has a rule for every ATen op of its forward pass at reduced sizes.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numoracle.kernelbench.judge import Judgement

__all__ = ["BODIES", "BACKWARD_MUTANTS", "HEADER", "is_judged", "judge_within", "official_how",
           "problem_files", "problem_name", "write_candidate"]

HEADER = '''import copy
import importlib.util

import torch

_spec = importlib.util.spec_from_file_location("_problem", {path!r})
_problem = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_problem)


def _contiguous_view(t):
    if not isinstance(t, torch.Tensor) or t.is_contiguous():
        return t
    return torch.as_strided(t, t.shape, torch.empty(t.shape).stride())


class ModelNew(_problem.Model):
'''

#: mutants whose forward is right and whose gradients are wrong: judged with backward on
BACKWARD_MUTANTS = ("grad_halved", "input_grad_dropped")
#: the body of ``ModelNew`` per candidate: ``model`` is correct, the others are mutants
BODIES = {
    "model": "    pass\n",
    "zeros": "    def forward(self, *args):\n"
             "        return torch.zeros_like(super().forward(*args))\n",
    "constant": "    def forward(self, *args):\n"
                "        out = super().forward(*args)\n"
                "        return torch.full_like(out, out.float().mean().item())\n",
    "bf16": "    def forward(self, *args):\n"
            "        if '_low' not in self.__dict__:\n"
            "            self.__dict__['_low'] = copy.deepcopy(self).bfloat16()\n"
            "        low = [a.bfloat16() if isinstance(a, torch.Tensor) and a.is_floating_point()\n"
            "               else a for a in args]\n"
            "        return _problem.Model.forward(self.__dict__['_low'], *low).float()\n",
    "strides": "    def forward(self, *args):\n"
               "        return super().forward(*[_contiguous_view(a) for a in args])\n",
    "tail": "    def forward(self, *args):\n"
            "        out = super().forward(*args).contiguous()\n"
            "        n = out.numel()\n"
            "        out.view(-1)[n - n % 256:] = 0\n"
            "        return out\n",
    "mutates": "    def forward(self, *args):\n"
               "        out = super().forward(*args)\n"
               "        for a in args:\n"
               "            if isinstance(a, torch.Tensor) and a.is_floating_point():\n"
               "                a.mul_(0.5)\n"
               "                break\n"
               "        return out\n",
    "reuse": "    def forward(self, *args):\n"
             "        cache = self.__dict__.setdefault('_cache', {})\n"
             "        key = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a\n"
             "                    for a in args)\n"
             "        if key not in cache:\n"
             "            cache[key] = super().forward(*args)\n"
             "        return cache[key]\n",
    "grad_halved": "    class _Halved(torch.autograd.Function):\n"
                   "        @staticmethod\n"
                   "        def forward(ctx, t):\n"
                   "            return t.clone()\n\n"
                   "        @staticmethod\n"
                   "        def backward(ctx, g):\n"
                   "            return g * 0.5  # the bug: every gradient halved\n\n"
                   "    def forward(self, *args):\n"
                   "        out = super().forward(*args)\n"
                   "        if isinstance(out, torch.Tensor) and out.requires_grad:\n"
                   "            return self._Halved.apply(out)\n"
                   "        return out\n",
    "input_grad_dropped": "    class _Dropped(torch.autograd.Function):\n"
                          "        @staticmethod\n"
                          "        def forward(ctx, out, x):\n"
                          "            ctx.x_shape = x.shape\n"
                          "            return out.clone()\n\n"
                          "        @staticmethod\n"
                          "        def backward(ctx, g):\n"
                          "            return g, g.new_zeros(ctx.x_shape)  # the bug\n\n"
                          "    def forward(self, *args):\n"
                          "        args = list(args)\n"
                          "        k = next((i for i, a in enumerate(args) if isinstance(\n"
                          "            a, torch.Tensor) and a.is_floating_point()), None)\n"
                          "        if k is None:\n"
                          "            return super().forward(*args)\n"
                          "        x, args[k] = args[k], args[k].detach()\n"
                          "        out = super().forward(*args)\n"
                          "        if isinstance(out, torch.Tensor) and x.requires_grad:\n"
                          "            return self._Dropped.apply(out, x)\n"
                          "        return out\n",
    "race": "    def forward(self, *args):\n"
            "        if not torch.cuda.is_available() or not any(\n"
            "                isinstance(a, torch.Tensor) and a.is_cuda for a in args):\n"
            "            return super().forward(*args)  # no streams to race on\n"
            "        side = self.__dict__.setdefault('_side', torch.cuda.Stream())\n"
            "        side.wait_stream(torch.cuda.current_stream())\n"
            "        with torch.cuda.stream(side):\n"
            "            torch.cuda._sleep(20_000_000)\n"
            "            res = super().forward(*args)\n"
            "        out = torch.empty_like(res)\n"
            "        out.copy_(res)  # on the main stream, which never waited for the side one\n"
            "        return out\n",
}


def problem_files(root: Path) -> list[Path]:
    """The problem files under ``root``: its ``level*/`` folders' ``*.py`` (or its own
    ``*.py`` without such folders), by level and problem number."""
    levels = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("level"))
    folders = levels or [root]

    def key(p: Path) -> tuple[str, int, str]:
        head = p.stem.split("_", 1)[0]
        return (p.parent.name, int(head) if head.isdigit() else 0, p.stem)

    return sorted((f for d in folders for f in d.glob("*.py")), key=key)


def problem_name(path: Path) -> str:
    """``level1/19_ReLU``: how a row names its problem."""
    return f"{path.parent.name}/{path.stem}"


def is_judged(path: Path) -> bool:
    """Whether the traced oracle has a rule for every op of the problem at reduced sizes
    (a problem that cannot be loaded or traced is not judged)."""
    from numoracle.kernelbench.cases import reduced_sizes  # noqa: PLC0415 - torch-heavy
    from numoracle.kernelbench.judge import missing_rules  # noqa: PLC0415
    from numoracle.kernelbench.problem import load_problem  # noqa: PLC0415

    try:
        problem = load_problem(path)
        base = problem.dropout_off()
        small = reduced_sizes(problem, base)
        if small is None:
            return False
        return not missing_rules(problem, {**base, **small})
    except Exception:  # noqa: BLE001 - a problem that cannot be traced is skipped
        return False


def write_candidate(folder: Path, problem: Path, body: str) -> Path:
    """The candidate file ``body`` (a key of :data:`BODIES`) for ``problem``, in ``folder``."""
    cand = folder / f"{problem.stem}__{body}.py"
    cand.write_text(HEADER.format(path=str(problem.resolve())) + BODIES[body])
    return cand


class _TimeUp(BaseException):
    """Raised by the alarm: a BaseException, so the judge's own handlers let it pass."""


def _alarm(signum: int, frame: object) -> None:
    raise _TimeUp


def judge_within(seconds: int, problem: Path, candidate: Path,
                 **kwargs: Any) -> Judgement | None:
    """``judge(problem, candidate, **kwargs)``, or None past ``seconds`` (a judgement
    too slow for a survey is recorded as a timeout, and the survey goes on)."""
    from numoracle.kernelbench.judge import judge  # noqa: PLC0415 - torch-heavy

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return judge(problem, candidate, **kwargs)
    except _TimeUp:
        return None
    finally:
        signal.alarm(0)


def official_how(j: Judgement) -> str:
    """How the judge took the official instance: ``whole``, whole in ``pieces`` of rows,
    on ``sampled`` rows of the whole instance, or at ``reduced`` sizes."""
    if j.official is not None and j.official.case.span:
        return "pieces"
    if j.official is not None and j.official.case.rows:
        return "sampled"
    return "reduced" if any("official instance" in n for n in j.notes) else "whole"
