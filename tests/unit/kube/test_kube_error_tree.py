"""Every error of the Kubernetes layer is drawn, with its exit code, in ``infctl.kube.errors``' tree and is
exported from ``infctl.kube``. KubeconfigError (431925f, exit 2) was in neither."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import infctl.kube
from infctl.errors import KubeError


def _kube_errors() -> list[type[KubeError]]:
    found = []
    for info in pkgutil.iter_modules(infctl.kube.__path__, "infctl.kube."):
        module = importlib.import_module(info.name)
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == info.name]
        found += [c for c in classes if issubclass(c, KubeError) and c is not KubeError]
    return found


def test_every_kube_error_is_in_the_tree_and_exported() -> None:
    tree = importlib.import_module("infctl.kube.errors").__doc__ or ""
    errors = _kube_errors()
    assert {e.__name__ for e in errors} >= {"KubeconfigError", "MissingCRDError", "NotReadyError"}
    for error in errors:
        assert re.search(rf"── {error.__name__} +{error.exit_code} ", tree), error.__name__
        assert error.__name__ in infctl.kube.__all__
        assert getattr(infctl.kube, error.__name__) is error
