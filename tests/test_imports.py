"""Imports inside numoracle point one way: no module reaches itself again.

The import graph is read statically from the source (``ast``), so every import
counts wherever it is written: at module level, inside a function (a lazy
import), or under ``if TYPE_CHECKING:``. A module ``a`` depends on ``b`` when
it imports ``b``, a name defined in ``b``, or its submodule ``b.c`` (then the
edge goes to ``b.c``, not to the package ``b``). A cycle is a
strongly connected component of that graph with more than one module (or a
module importing itself); every cycle found fails the test, naming its modules
and the imports that close it.

``ALLOWED`` lists the cycles that exist today and are being removed: each entry
must still be a cycle (delete the entry with the cycle), and must match exactly
(a cycle that grows or shrinks fails until its entry says so). It is empty once
the package is acyclic.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "numoracle"

#: cycles being removed, each the set of its modules (without the ``numoracle.`` prefix)
ALLOWED: list[frozenset[str]] = []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(node: ast.AST, module: str, is_package: bool,
              modules: dict[str, Path]) -> Iterator[str]:
    """The modules of numoracle an import statement in ``module`` brings in:
    ``from P import m`` names the submodule ``P.m`` where there is one, else
    ``P`` (a name defined there)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        for alias in node.names:
            yield f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module: line of the first such import}, within numoracle."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            for name in _imported(node, module, path.name == "__init__.py", modules):
                if name in modules and name != module:
                    graph[module].setdefault(name, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _short(module: str) -> str:
    return module.removeprefix("numoracle.")


def describe(component: frozenset[str], graph: dict[str, dict[str, int]]) -> str:
    """The cycle's modules and the imports among them, with their lines."""
    edges = [f"    {_short(a)}:{line} imports {_short(b)}"
             for a in sorted(component) for b, line in sorted(graph[a].items())
             if b in component]
    return "{" + ", ".join(sorted(_short(m) for m in component)) + "}\n" + "\n".join(edges)


def test_the_graph_sees_every_kind_of_import() -> None:
    """The reader resolves relative, absolute and function-level imports."""
    graph = import_graph()
    assert "numoracle.oracle.precision" in graph["numoracle.targets.target"]  # from ..oracle...
    assert "numoracle.plugins" in graph["numoracle.kernels"]                 # from ..plugins
    assert "numoracle.zoo" in graph["numoracle.cli.zoo"]                   # inside a function
    assert "numoracle.targets.target" in graph["numoracle.zoo"]              # a package's own


def test_cycles_are_found() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycle() -> None:
    graph = import_graph()
    found = {frozenset(_short(m) for m in c): c for c in cycles(graph)}
    new = [describe(c, graph) for short, c in found.items() if short not in ALLOWED]
    gone = [sorted(c) for c in ALLOWED if c not in found]
    assert not new, "import cycles in numoracle (imports must point one way):\n" + "\n".join(new)
    assert not gone, f"these allowed cycles are gone (or changed): delete them from ALLOWED: {gone}"


def _reached(graph: dict[str, dict[str, int]], module: str) -> set[str]:
    """Every module ``module`` imports, however indirectly."""
    seen, todo = set(), [module]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _assert_below(graph: dict[str, dict[str, int]], layers: tuple[str, ...],
                  above: tuple[str, ...]) -> None:
    """No module of ``layers`` reaches a module of ``above``."""
    for module in (m for m in graph if m.startswith(layers)):
        reached = sorted(m for m in _reached(graph, module) if m.startswith(above))
        assert not reached, f"{_short(module)} reaches {[_short(m) for m in reached]}"


def test_the_oracle_never_imports_strategies_kernels_or_the_zoo() -> None:
    """The oracle is the bottom layer: nothing it imports, however indirectly, is a
    strategy, a kernel under test or a mutant."""
    _assert_below(import_graph(), ("numoracle.oracle",),
                  ("numoracle.strategies", "numoracle.kernels", "numoracle.zoo"))


def test_the_checks_and_their_harness_never_import_kernels_under_test() -> None:
    """Targets, backends, the checks and the store sit below the kernels under
    test: a check that must find a kernel again by name is handed a resolver
    from above (``numoracle.kernels.resolve_target``), never imports one."""
    _assert_below(import_graph(),
                  ("numoracle.targets", "numoracle.checking", "numoracle.store",
                   "numoracle.cases"),
                  ("numoracle.kernels", "numoracle.zoo"))


def test_the_kernels_package_holds_kernels_under_test() -> None:
    """Every module of ``numoracle.kernels`` but its registry is a kernel under
    test or a kernel's helper: the harness (targets, backends, finding a target
    by its source) lives in ``numoracle.targets``."""
    graph = import_graph()
    harness = ("numoracle.kernels.backends", "numoracle.kernels.sources",
               "numoracle.kernels.registry")
    assert not [m for m in graph if m in harness]
    assert {"numoracle.targets.target", "numoracle.targets.backends",
            "numoracle.targets.sources"} <= set(graph)

