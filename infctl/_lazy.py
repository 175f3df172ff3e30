"""Package exports imported on first use (PEP 562), so importing one small module of a package does not
import all of it.

A package's ``__init__`` lists its names under ``if TYPE_CHECKING:`` (what type checkers and readers see) and
maps each to its module for the runtime::

    __getattr__ = lazy_exports(__name__, {"render": "infctl.manifests.render", ...})

An export named like its own module (``infctl.manifests.render.render``) stays the export, as it was with
eager imports: when that module is imported, the import system binds the module on the package, and the
package binds the export instead. ``tests/unit/test_lazy_exports.py`` checks every lazy package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` imported from ``modules[name]`` when first read,
    then kept in the package's namespace (later reads are plain attribute reads)."""
    pkg = sys.modules[package]
    shadowed = frozenset(name for name, module in modules.items() if module == f"{package}.{name}")
    if shadowed:
        pkg.__class__ = _ExportsOverSubmodules
        pkg.__dict__["_shadowed_submodules"] = shadowed

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(pkg, name, value)
        return value

    return __getattr__


class _ExportsOverSubmodules(ModuleType):
    """A package some of whose exports are named like the module defining them."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            isinstance(value, ModuleType)
            and name in self.__dict__.get("_shadowed_submodules", ())
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            value = getattr(value, name)  # the submodule just imported: bind its export, as before
        super().__setattr__(name, value)
