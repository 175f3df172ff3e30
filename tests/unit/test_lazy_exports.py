"""Packages whose exports load on first use (``infctl._lazy``): every exported name resolves to its module's
object, the runtime map and ``__all__`` agree, and importing one small module of a package leaves the rest of
it unloaded."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import import_module

import pytest

LAZY = ("infctl.config", "infctl.kube", "infctl.manifests")


@pytest.mark.parametrize("package", LAZY)
def test_every_export_resolves_to_its_modules_object(package: str) -> None:
    pkg = import_module(package)
    modules: dict[str, str] = pkg._MODULES
    assert sorted(modules) == sorted(pkg.__all__)
    for name, module in modules.items():
        assert getattr(pkg, name) is getattr(import_module(module), name)
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = pkg.nosuch


def test_a_package_star_import_gets_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from infctl.manifests import *", namespace)
    assert "render" in namespace and "plan_placement" in namespace


def _loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out))


def test_the_router_file_loads_without_the_profile_models() -> None:
    loaded = _loaded_after("from infctl.config import RouterFile, load_router")
    assert "infctl.config.router" in loaded and "infctl.config.loader" in loaded
    assert not {"infctl.config.deployment", "infctl.config.cluster"} & loaded


def test_labels_and_the_admin_secret_load_without_the_renderer() -> None:
    loaded = _loaded_after("from infctl.manifests import admin_secret, labels")
    assert not {"infctl.manifests.render", "jinja2", "infctl.config.deployment"} & loaded


def test_the_pod_watch_loads_without_apply_and_release() -> None:
    loaded = _loaded_after("import infctl.kube.watch")
    assert "infctl.kube.client" in loaded
    assert not {"infctl.kube.release", "infctl.kube.apply", "infctl.manifests.render", "jinja2"} & loaded


def test_an_export_named_like_its_module_stays_the_export() -> None:
    """``infctl.kube.scale`` (the function) once ``infctl.kube.scale`` (the module) has been imported, as
    it was with eager imports."""
    code = (
        "import infctl.kube.scale, infctl.manifests.render\n"
        "import infctl.kube, infctl.manifests\n"
        "print(callable(infctl.kube.scale), callable(infctl.manifests.render))\n"
        "from infctl.kube import scale\n"
        "from infctl.manifests import render\n"
        "print(scale.__module__, render.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "True", "infctl.kube.scale", "infctl.manifests.render"]
