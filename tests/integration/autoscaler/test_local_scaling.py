"""Runtime scaling of the local supervisor over simulated engines and the real router: start engines from
the reserve and register them, drain before stopping so no stream is cut, keep the router in step."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from localkit import HOLDING, admin_headers, hang, held_streams, local_profile, supervised, until

from infctl.config import DeploymentProfile
from infctl.local import LocalPlan, build_plan, port_is_free
from infctl.local.plan import router_specs


def profile(tmp_path: Path, **layout: Any) -> DeploymentProfile:
    fields: dict[str, Any] = {
        "router": {"enabled": True, "policy": "round_robin"},
        "autoscaler": {"enabled": True, "both": {"min": 1, "max": 3}},
        **layout,
    }
    return local_profile(
        tmp_path,
        "scale",
        base_port=25000,
        model={
            "pd": {"kv_connector": "nixl"},
            "sim": {"profile": "llama3-8b-h100", "num_gpu_blocks": 1024, "speedup": 10},
        },
        **fields,
    )


async def scale_status(client: httpx.AsyncClient, plan: LocalPlan) -> dict[str, Any]:
    resp = await client.get(f"http://127.0.0.1:{plan.control_port}/scale")
    resp.raise_for_status()
    body: dict[str, Any] = resp.json()
    return body


async def backends(client: httpx.AsyncClient, router: str) -> set[str]:
    listed = (await client.get(f"{router}/admin/backends")).json()["backends"]
    return {b["url"] for b in listed}


GROUPS = {
    "mode": "group",
    "groups": 1,
    "group": {"prefill": 1, "decode": 1},
    "autoscaler": {"enabled": True, "prefill": {"min": 1, "max": 2}, "decode": {"min": 1, "max": 2}},
}


# Aggregated mode goes through the same code in test_autoscaler_local; group mode adds whole PD groups.
@pytest.mark.parametrize(
    ("unit", "layout", "last"),
    [
        ("group", GROUPS, ["engine-g0-prefill-0", "engine-g0-decode-0", "router"]),
    ],
)
async def test_scale_out_registers_and_scale_in_drains_without_cutting_streams(
    tmp_path: Path, unit: str, layout: dict[str, Any], last: list[str]
) -> None:
    plan = build_plan(profile(tmp_path, **layout), is_free=port_is_free, daemons=(router_specs,))
    members = len(last) - 1
    assert len(plan.reserve) == members and plan.control_port is not None
    router = plan.entrypoint.url
    async with (
        supervised(plan, HOLDING) as run,
        # Streams stay silent while the engines hang: a read timeout longer than any wait of the test.
        httpx.AsyncClient(timeout=120, trust_env=False, headers=admin_headers(plan)) as c,
    ):
        assert (await scale_status(c, plan))["units"][unit]["ready"] == 1
        r = await c.put(f"http://127.0.0.1:{plan.control_port}/scale/{unit}", json={"replicas": 2})
        assert r.status_code == 202

        async def two_ready() -> bool:
            return bool((await scale_status(c, plan))["units"][unit]["ready"] == 2)

        await until(two_ready)
        assert len(await backends(c, router)) == 2 * members
        # Streams on both groups, held open (the engines hang) while the test scales in to one group.
        # Eight, so that some land on the group being removed whatever the tie-breaks (1 in 256 otherwise
        # would put all on the kept one).
        engines = [*plan.specs, *plan.reserve]
        streams = await held_streams(c, router, engines, 8)
        seen: dict[str, Any] = {}
        r = await c.put(f"http://127.0.0.1:{plan.control_port}/scale/{unit}", json={"replicas": 1})
        assert r.status_code == 202

        async def draining_with_streams() -> bool:
            seen["listed"] = (await c.get(f"{router}/admin/backends")).json()["backends"]
            return any(b["draining"] and b["inflight"] > 0 for b in seen["listed"])

        # The removed group still holds streams: it drains, and stays listed, rather than being stopped.
        await until(draining_with_streams, within=60, seen=seen)
        await hang(c, engines, on=False)
        assert await asyncio.gather(*streams) == [4000] * 8

        async def one_left() -> bool:
            s = (await scale_status(c, plan))["units"][unit]
            return bool(s["ready"] == 1 and s["stopping"] == 0)

        await until(one_left)
        assert await backends(c, router) == {s.url for s in plan.specs[:members]}
        bad = await c.put(f"http://127.0.0.1:{plan.control_port}/scale/{unit}", json={"replicas": 9})
        assert bad.status_code == 400 and "out of 0..2" in bad.json()["error"]["message"]
    assert run.final.status == "stopped"
    assert [p.name for p in run.final.processes] == last
