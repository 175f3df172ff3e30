"""The daemon's memory in its ConfigMap (kmock's API server over HTTP): nothing saved reads as a cold start,
a save is a merge patch of one key that keeps the rendered labels, and a restart reads it back."""

from __future__ import annotations

import asyncio
import json

import pytest

from infctl.autoscaler.memory import record, restore
from infctl.autoscaler.memory_store import KEY, ConfigMapStore
from infctl.autoscaler.snapshot import ScalerState, UnitState
from infctl.errors import InfctlError, KubeError
from infctl.kube import KubeClient

CONFIGMAPS = "/api/v1/namespaces/inference/configmaps"


async def rendered(client: KubeClient, name: str, data: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "m"}}}
    if data is not None:
        body["data"] = data
    await asyncio.to_thread(client.request, "POST", CONFIGMAPS, body=body)


async def test_nothing_saved_reads_as_none(kmock_client: KubeClient) -> None:
    assert await ConfigMapStore(kmock_client, "absent").load() is None  # not rendered (yet)
    await rendered(kmock_client, "m-autoscaler-memory")
    assert await ConfigMapStore(kmock_client, "m-autoscaler-memory").load() is None  # rendered, empty


async def test_a_save_is_read_back_by_the_next_run(kmock_client: KubeClient) -> None:
    await rendered(kmock_client, "m-autoscaler-memory")
    store = ConfigMapStore(kmock_client, "m-autoscaler-memory")
    state = ScalerState(units=(("both", UnitState(last_scale_at=90.0)),))
    await store.save(record(state, now=100.0, wall=1000.0))
    again = ConfigMapStore(kmock_client, "m-autoscaler-memory", "inference")
    restored, gap = restore(await again.load(), now=0.0, wall=1020.0, forecast_window_s=None)
    assert gap == 20.0 and restored.of("both").last_scale_at == -30.0
    obj = await asyncio.to_thread(kmock_client.request, "GET", f"{CONFIGMAPS}/m-autoscaler-memory")
    assert obj["metadata"]["labels"] == {"app": "m"}  # the render's labels stay
    assert json.loads(obj["data"][KEY])["version"] == 1


async def test_a_corrupt_record_and_a_missing_configmap_are_errors(
    kmock_client: KubeClient,
) -> None:
    await rendered(kmock_client, "m-autoscaler-memory", {KEY: "{oops"})
    with pytest.raises(InfctlError, match="not JSON"):
        await ConfigMapStore(kmock_client, "m-autoscaler-memory").load()
    with pytest.raises(KubeError):  # deleted by hand: the daemon counts the error and goes on
        await ConfigMapStore(kmock_client, "gone").save({"version": 1})
