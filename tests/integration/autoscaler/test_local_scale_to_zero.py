"""Scale-to-zero from a profile on the local target, with simulated engines, the router and ``infctl
autoscaler`` as supervised processes: an idle fleet (or length pool) goes to 0 engines after its window, and
the next request is held by the router while the autoscaler starts an engine, then answered.

The engines run a hundred times faster than real time and the autoscaler's clock with them: a 300 s idle
window lasts 3 s here. The router's hold is in wall seconds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from localkit import fixed_ports, local_profile, supervised

from infctl.config import DeploymentProfile
from infctl.local import build_plan, port_is_free
from infctl.telemetry import parse_metrics

SIM = {"profile": "llama3-8b-h100", "num_gpu_blocks": 512, "block_size": 16, "speedup": 100}
ZERO = {"after_s": 300, "hold_s": 60}


def aggregated(tmp_path: Path) -> DeploymentProfile:
    return local_profile(
        tmp_path,
        "zero",
        base_port=31400,
        model={"sim": SIM},
        router={"enabled": True, "policy": "round_robin"},
        autoscaler={"enabled": True, "both": {"min": 0, "max": 2}, "scale_to_zero": ZERO, "interval_s": 20},
    )


def pooled(tmp_path: Path) -> DeploymentProfile:
    return DeploymentProfile.model_validate(
        {
            "name": "zero-pools",
            "target": "local",
            "mode": "aggregated",
            "model": {"engine": "vllm", "model": "m", "served_model_name": "m", "sim": SIM},
            "length_pools": [
                {"name": "short", "max_prompt_tokens": 64, "replicas": 1},
                {"name": "long", "replicas": 1, "spill_to": [],
                 "autoscaler": {"both": {"min": 0, "max": 1}, "scale_to_zero": ZERO}},
            ],
            "router": {"enabled": True, "policy": "least_load"},
            "autoscaler": {"enabled": True, "interval_s": 20},
            "local": {"base_port": fixed_ports(31500), "run_dir": str(tmp_path)},
        }
    )  # fmt: skip


async def unit(client: httpx.AsyncClient, control: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"{control}/scale")).json()["units"][name]
    return body


async def until_unit(client: httpx.AsyncClient, control: str, name: str, done: Any, within: float) -> None:
    async with asyncio.timeout(within):
        while not done(await unit(client, control, name)):
            await asyncio.sleep(0.1)


async def startups(client: httpx.AsyncClient, autoscaler: str, within: float) -> dict[str, float]:
    """The autoscaler's measured start-ups of unit ``both`` (once it has one) and the hold it checks them
    against."""
    names = {"infctl_autoscaler_replica_startup_seconds_count", "infctl_autoscaler_hold_when_empty_seconds"}
    async with asyncio.timeout(within):
        while True:
            families = parse_metrics((await client.get(f"{autoscaler}/metrics")).text, names)
            found = {n: s.value for n, samples in families.items() for s in samples}
            if found.get("infctl_autoscaler_replica_startup_seconds_count", 0) >= 1:
                return found
            await asyncio.sleep(0.1)


async def complete(client: httpx.AsyncClient, url: str, words: int) -> httpx.Response:
    body = {"model": "m", "prompt": "word " * words, "max_tokens": 4}
    return await client.post(f"{url}/v1/completions", json=body)


async def test_an_idle_fleet_goes_to_zero_and_its_next_request_waits_for_an_engine(tmp_path: Path) -> None:
    plan = build_plan(aggregated(tmp_path), is_free=port_is_free)
    control = f"http://127.0.0.1:{plan.control_port}"
    async with supervised(plan, ready_within=40), httpx.AsyncClient(timeout=60, trust_env=False) as c:
        assert (await complete(c, plan.entrypoint.url, 8)).status_code == 200
        await until_unit(c, control, "both", lambda u: u["desired"] == 0 and u["ready"] == 0, within=40)
        # No engine at all: the router holds this request until the autoscaler has started one.
        resp = await complete(c, plan.entrypoint.url, 8)
        assert resp.status_code == 200, resp.text
        # The router has the engine before the supervisor counts it ready (it registers it first), so the
        # answer can come back before /scale shows it.
        await until_unit(c, control, "both", lambda u: u["ready"] >= 1, within=10)
        # The autoscaler timed the engine it started, and knows the router's hold to check it against.
        autoscaler = next(s.url for s in plan.specs if s.kind == "autoscaler")
        measured = await startups(c, autoscaler, within=20)
        assert measured["infctl_autoscaler_hold_when_empty_seconds"] == ZERO["hold_s"]


async def test_a_length_pool_goes_to_zero_alone_and_wakes_for_its_own_request(tmp_path: Path) -> None:
    plan = build_plan(pooled(tmp_path), is_free=port_is_free)
    control = f"http://127.0.0.1:{plan.control_port}"
    async with supervised(plan, ready_within=40), httpx.AsyncClient(timeout=60, trust_env=False) as c:
        await until_unit(c, control, "long", lambda u: u["desired"] == 0 and u["ready"] == 0, within=40)
        assert (await unit(c, control, "short"))["ready"] == 1  # the other pool keeps its engine
        short = await complete(c, plan.entrypoint.url, 8)
        assert short.status_code == 200
        assert (await unit(c, control, "long"))["desired"] == 0  # a short request does not wake it
        resp = await complete(c, plan.entrypoint.url, 200)  # the long pool's: held until it has an engine
        assert resp.status_code == 200, resp.text
        await until_unit(c, control, "long", lambda u: u["ready"] == 1, within=10)
