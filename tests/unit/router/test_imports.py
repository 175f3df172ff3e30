"""No import circles inside ``infctl/router``: read from the source with ``ast``, as a reader would.

Two graphs. What runs: every import (function-local ones too) but those under ``if TYPE_CHECKING:``; it
must have no circle at all. What a reader follows: the same plus the ``TYPE_CHECKING`` ones, which tie
modules together just as much (before ``RouterState`` had a module of its own, ten handler modules named
``server`` there, and ``server`` imported them); it may keep only the edges in ``PENDING``."""

from __future__ import annotations

import ast
from pathlib import Path

import infctl.router

ROUTER = Path(infctl.router.__file__).parent
PACKAGE = "infctl.router"

PENDING: dict[tuple[str, str], str] = {}
"""Edges under ``TYPE_CHECKING`` allowed to close a circle, each with why (none today: ``RouterState`` and
``ClientRequest`` live in leaf modules, ``state`` and ``client``)."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROUTER.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(ROUTER).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, in_type_checking: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in ``tree`` with whether it sits under ``if TYPE_CHECKING:``."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append((child, in_type_checking))
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for node in child.body:
                found += _imports(ast.Module(body=[node], type_ignores=[]), True)
            for node in child.orelse:
                found += _imports(ast.Module(body=[node], type_ignores=[]), in_type_checking)
        else:
            found += _imports(child, in_type_checking)
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    out = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            out.add(f"{base}.{alias.name}")  # a submodule: ``from infctl.router import admin``
        elif base in known:
            out.add(base)
    return out


def graph(*, with_type_checking: bool) -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets: set[str] = set()
        for node, type_only in _imports(tree):
            if with_type_checking or not type_only:
                targets |= _targets(node, name, path.name == "__init__.py", known)
        edges[name] = targets - {name}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _short(name: str) -> str:
    return name.removeprefix(PACKAGE + ".")


def test_the_graph_reader_sees_every_kind_of_import() -> None:
    edges = graph(with_type_checking=True)
    assert "infctl.router.admin" in edges["infctl.router.app"]  # from infctl.router import admin
    assert "infctl.router.state" in edges["infctl.router.proxy"]  # under TYPE_CHECKING
    assert "infctl.router.policies" in edges["infctl.router.server"]  # a subpackage
    assert "infctl.router.state" not in graph(with_type_checking=False)["infctl.router.proxy"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_what_runs_has_no_import_circle() -> None:
    assert circles(graph(with_type_checking=False)) == []


def test_what_a_reader_follows_has_no_import_circle_but_the_pending_edges() -> None:
    edges = graph(with_type_checking=True)
    for (a, b), _why in PENDING.items():
        edges[f"{PACKAGE}.{a}"].discard(f"{PACKAGE}.{b}")
    assert [[_short(m) for m in c] for c in circles(edges)] == []
