"""The router's admin-token variable has one definition, which every reader imports."""

from __future__ import annotations

import ast
from pathlib import Path

import infctl
from infctl.config.router import ADMIN_TOKEN_ENV

PACKAGE = Path(infctl.__file__).parent


def _defines_the_name(node: ast.AST) -> bool:
    """An assignment of the variable's name as a string literal (``X = "INFCTL_ROUTER_ADMIN_TOKEN"``)."""
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    return isinstance(value, ast.Constant) and value.value == ADMIN_TOKEN_ENV


def test_only_config_router_defines_it() -> None:
    definitions = sorted(
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if _defines_the_name(node)
    )
    assert len(definitions) == 1 and definitions[0].startswith("config/router.py:"), definitions


def test_readers_hold_the_same_name() -> None:
    from infctl.autoscaler import daemon
    from infctl.cutover import backends
    from infctl.manifests import admin_secret
    from infctl.router import admin_validate

    assert ADMIN_TOKEN_ENV == "INFCTL_ROUTER_ADMIN_TOKEN"
    for module in (daemon, backends, admin_secret):
        assert module.ADMIN_TOKEN_ENV == ADMIN_TOKEN_ENV, module.__name__
    assert admin_validate.DEFAULT_TOKEN_ENV == ADMIN_TOKEN_ENV
