"""A fake API server over real HTTP on 127.0.0.1 (kmock, extended in ``kubefake.py``) and a client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import kmock
import kubernetes.client
import pytest
from kubefake import ClusterEmulator, FakeCluster

from infctl.kube import ClientSettings, connect


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with ClusterEmulator() as api, kmock.Server(api) as server:
        api.serve()
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        client = connect(ClientSettings(namespace="inference", timeout_s=5), configuration=cfg)
        yield FakeCluster(api, client, cfg.host)
        client.close()
