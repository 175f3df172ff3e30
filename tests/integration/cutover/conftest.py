"""The fake Kubernetes API reused from the kube tests rather than copied (``cluster``: kmock extended in
``tests/integration/kube/kubefake.py``), and ``cutover_stack``: two simulated engines behind a live router
(``start_router``, ``start_sim`` from tests/conftest.py) as upstream groups old and new."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cutoverstack import Stack

from infctl.router.snapshot import Backend

HERE = Path(__file__).resolve().parent


def _module(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_module("kubefake", HERE.parent / "kube" / "kubefake.py")  # imported by name by the kube fixtures
_kube = _module("kube_fixtures", HERE.parent / "kube" / "conftest.py")
cluster = _kube.cluster


@pytest.fixture
async def cutover_stack(start_sim, start_router) -> Stack:  # type: ignore[no-untyped-def]
    """Old and new simulated engines (a fifth of real time) behind one router, no split configured yet."""
    old, new = await start_sim(time_scale=0.2), await start_sim(time_scale=0.2)
    backends = [Backend(id="old", url=old.urls[0], upstream="old"),
                Backend(id="new", url=new.urls[0], upstream="new")]  # fmt: skip
    url = await start_router(backends, policy="least_load")
    return Stack(url, old, new)
