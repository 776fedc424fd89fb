"""Dispatch rules: how many workgroups a WGSL pass runs, as arithmetic over the
op's parameters.

A rule is one to three expressions (x, y, z), each an int or a string such as
``"ceil(out_features / 16)"`` or ``"ceil(batch * in_features / 64)"``: names
are the op's parameters (``kernel_size[0]`` takes an entry of a pair), the
operators ``+ - * / // %`` (``/`` is exact rational division), and the
functions ``ceil``, ``floor``, ``max``, ``min`` and ``prod`` (a shape's
product). Nothing else is evaluated: a rule is data, kept in the repro.

Examples
--------
>>> DispatchRule.parse(("ceil(n / 16)", "ceil(m / 16)")).counts({"n": 33, "m": 16})
(3, 1, 1)
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...errors import InvalidArgument

__all__ = ["DispatchRule"]

_FUNCS = {"ceil": math.ceil, "floor": math.floor, "max": max, "min": min}
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: Fraction(a) / Fraction(b),
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def _eval(node: ast.AST, params: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, params, text)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise InvalidArgument(f"dispatch {text!r}: {node.id!r} is not a parameter of the "
                                  f"op; its parameters are {sorted(params)}")
        return params[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return _eval(node.value, params, text)[node.slice.value]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left, params, text), _eval(node.right, params, text)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise InvalidArgument(f"dispatch {text!r} divides by zero")
        return _OPS[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, params, text)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_eval(a, params, text) for a in node.args]
        if node.func.id == "prod" and len(args) == 1:
            return math.prod(args[0])
        if node.func.id in _FUNCS and args:
            return _FUNCS[node.func.id](*args)
    raise InvalidArgument(f"dispatch {text!r}: {ast.unparse(node)!r} is not allowed; a rule "
                          "uses parameter names, ints, + - * / // %, and ceil, floor, max, "
                          "min, prod, e.g. 'ceil(batch / 64)'")


@dataclass(frozen=True)
class DispatchRule:
    """The workgroup counts of one pass: up to three expressions (x, y, z)."""

    exprs: tuple[str, ...]

    @classmethod
    def parse(cls, rule: Any) -> DispatchRule:
        """A rule from an int, a string or a sequence of up to three of them."""
        items = [rule] if isinstance(rule, (int, str)) else rule
        if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence) \
                or not 1 <= len(items) <= 3:
            raise InvalidArgument(f"dispatch={rule!r} must be one to three workgroup counts "
                                  "(ints or expressions), e.g. ('ceil(n / 16)', 'ceil(m / 16)')")
        exprs = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise InvalidArgument(f"dispatch entry {item!r} must be an int or an "
                                      "expression such as 'ceil(batch / 64)'")
            text = str(item)
            try:
                ast.parse(text, mode="eval")
            except SyntaxError:
                raise InvalidArgument(f"dispatch entry {text!r} is not an expression; write "
                                      "e.g. 'ceil(batch / 64)'") from None
            exprs.append(text)
        return cls(tuple(exprs))

    def counts(self, params: Mapping[str, Any]) -> tuple[int, int, int]:
        """The workgroup counts (x, y, z) for a case with ``params``."""
        out = []
        for text in self.exprs:
            v = _eval(ast.parse(text, mode="eval"), params, text)
            if isinstance(v, Fraction):
                if v.denominator != 1:
                    raise InvalidArgument(f"dispatch {text!r} = {v} for {dict(params)} is not "
                                          "a whole number; wrap it in ceil() or floor()")
                v = int(v)
            if not isinstance(v, int) or v < 0:
                raise InvalidArgument(f"dispatch {text!r} = {v!r} for {dict(params)} must be "
                                      "a whole number >= 0")
            out.append(int(v))
        return (*out, *([1] * (3 - len(out))))  # type: ignore[return-value]
