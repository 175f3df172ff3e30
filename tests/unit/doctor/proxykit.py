"""The fake API server (kubefake, real HTTP on 127.0.0.1) for doctor's cluster-side checks of a release's
router and autoscaler, and the Services a deploy of a profile leaves in it (imported as a sibling module)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import kmock
import kubernetes.client

from infctl.config import DeploymentProfile
from infctl.doctor.result import CheckResult, Group
from infctl.kube import ClientSettings, KubeClient, connect
from infctl.manifests import RenderOptions, render

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"  # namespace inference, router and autoscaler on
NS = "inference"
Factory = Callable[[], KubeClient]


def kubefake() -> ModuleType:
    if "kubefake" not in sys.modules:  # shared with the kube, router and cutover tests, loaded once by name
        path = ROOT / "tests" / "integration" / "kube" / "kubefake.py"
        spec = importlib.util.spec_from_file_location("kubefake", path)
        assert spec is not None and spec.loader is not None
        sys.modules["kubefake"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["kubefake"]


@asynccontextmanager
async def fake_api() -> AsyncIterator[tuple[Any, Factory]]:
    """The emulator and a factory of clients of it."""
    async with kubefake().ClusterEmulator() as emulator, kmock.Server(emulator) as server:
        emulator.serve()
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        yield emulator, lambda: connect(ClientSettings(timeout_s=5), configuration=cfg)


def deployed(api: Any, profile: DeploymentProfile, *, components: tuple[str, ...]) -> None:
    """Store the Services render makes for ``components`` in the fake, as a deploy would leave them."""
    for obj in render(profile, RenderOptions(namespace=NS)):
        component = obj["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if obj["kind"] == "Service" and component in components:
            api.objects["v1/services", NS, obj["metadata"]["name"]] = obj


def by_name(results: list[CheckResult], group: Group) -> dict[str, CheckResult]:
    return {r.name: r for r in results if r.group == group}
