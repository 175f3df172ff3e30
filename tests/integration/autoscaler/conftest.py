"""Puts tests/integration on sys.path so this folder's tests import the local-target helpers
(``from localkit import ...``) rather than copying them; and gives the Kubernetes daemon tests
(``test_kube_*.py``) one fake API server: kmock's over HTTP, serving Deployments with their ``scale`` and
``status`` subresources, and a kube client of namespace ``inference`` on it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import kmock
import kubernetes.client
import pytest

from infctl.kube import ClientSettings, KubeClient, connect

_INTEGRATION = str(Path(__file__).resolve().parent.parent)
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)

NAMESPACE = "inference"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"


@pytest.fixture
def deployments() -> dict[str, tuple[int, int]]:
    """The Deployments :func:`kmock_kube` starts with, name -> (``spec.replicas``,
    ``status.readyReplicas``); a test module overrides this fixture to have some."""
    return {}


@pytest.fixture
async def kmock_kube(
    deployments: dict[str, tuple[int, int]],
) -> AsyncIterator[tuple[kmock.KubernetesEmulator, KubeClient]]:
    """kmock's API server (to read the requests it got) and a kube client on it, ``deployments`` created."""
    async with kmock.KubernetesEmulator() as api, kmock.Server(api) as server:
        api.resources["apps/v1/deployments"] = kmock.ResourceInfo(
            kind="Deployment", namespaced=True, subresources={"scale", "status"}
        )
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        client = connect(ClientSettings(namespace=NAMESPACE, timeout_s=5), configuration=cfg)
        for name, (replicas, ready) in deployments.items():
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name},
                "spec": {"replicas": replicas},
                "status": {"readyReplicas": ready},
            }
            await asyncio.to_thread(client.request, "POST", DEPLOYMENTS, body=body)
        yield api, client
        client.close()


@pytest.fixture
def kmock_client(kmock_kube: tuple[kmock.KubernetesEmulator, KubeClient]) -> KubeClient:
    """:func:`kmock_kube`'s client alone."""
    return kmock_kube[1]
