"""Data-parallel engines on the local target, end to end over simulated engines and the real router.

A profile with ``model.data_parallel_size: 2`` runs each simulated engine with two ranks behind its port,
each rank publishing KV events on its own port; the router routes to every rank as a backend of its own
(``URL#dpN``), and the supervisor registers, drains and removes all ranks of an engine together.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from kvkit import kv_batches, until_batches, until_subscribed
from localkit import HOLDING, admin_headers, hang, held_streams, local_profile, supervised, until

from infctl import tokens
from infctl.config import DeploymentProfile
from infctl.local import build_plan, port_is_free
from infctl.local.plan import router_specs
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

BLOCK = 16
PREFIXES = 12
"""Distinct shared prefixes; each first request lands on a rank by the router's tie-break (all on one rank:
a 1 in 2048 chance), and its follower must land on the same rank."""


def profile(tmp_path: Path, speedup: float = 20, **changes: Any) -> DeploymentProfile:
    sim = {"profile": "llama3-8b-h100", "num_gpu_blocks": 1024, "block_size": BLOCK, "speedup": speedup}
    fields: dict[str, Any] = {
        # Prefix scoring on the KV-event index alone, with no entries for requests merely routed: only the
        # ranks' own events can send a follower to the rank that cached its prefix.
        "router": {"enabled": True, "policy": "prefix_precise", "settings": {"speculative_ttl_s": 0.0}},
        **changes,
    }
    model = {"data_parallel_size": 2, "kv_events": {"enabled": True}, "sim": sim}
    return local_profile(tmp_path, "dp", base_port=27000, model=model, **fields)


async def per_rank(client: httpx.AsyncClient, engine_url: str, name: str) -> dict[str, float]:
    """A counter of the engine's /metrics by rank (vLLM labels each rank's series ``engine``), summed over
    its other labels."""
    text = (await client.get(f"{engine_url}/metrics")).text
    out: dict[str, float] = {}
    for sample in parse_metrics(text, {name}).get(name, []):
        rank = sample.labels["engine"]
        out[rank] = out.get(rank, 0.0) + sample.value
    return out


async def test_each_rank_is_a_backend_gets_traffic_and_keeps_its_cached_prefixes(tmp_path: Path) -> None:
    plan = build_plan(profile(tmp_path), is_free=port_is_free)
    engine = plan.specs[0]
    assert engine.data_parallel_size == 2 and engine.ports["kv_events.dp1"] == engine.ports["kv_events"] + 1
    router = plan.entrypoint.url
    async with supervised(plan) as run:
        async with httpx.AsyncClient(timeout=20, trust_env=False, headers=admin_headers(plan)) as c:
            listed = (await c.get(f"{router}/admin/backends")).json()["backends"]
            assert sorted(b["id"] for b in listed) == [f"{engine.url}#dp0", f"{engine.url}#dp1"]
            kv = (await c.get(f"{router}/admin/policy")).json()["kv_sources"]
            assert sorted(s["endpoint"] for s in kv) == [
                f"tcp://127.0.0.1:{engine.ports['kv_events']}",
                f"tcp://127.0.0.1:{engine.ports['kv_events.dp1']}",
            ]
            # ZMQ slow joiner: each rank's events reach the router before the test's first request.
            ranks = [Backend(id=f"{engine.url}#dp{r}", url=engine.url, dp_rank=r) for r in (0, 1)]
            await until_subscribed(c, router, ranks, model="m")
            warm = await per_rank(c, engine.url, "vllm:request_success_total")
            prefixes = [tokens.synth_words(40 * BLOCK, salt=10 + i) for i in range(PREFIXES)]

            async def ask(prefix: str, j: int) -> None:
                body = {"model": "m", "prompt": f"{prefix} question {j}", "max_tokens": 2}
                assert (await c.post(f"{router}/v1/completions", json=body)).status_code == 200

            batches = await kv_batches(c, router)
            for p in prefixes:
                await ask(p, 0)
            served = await per_rank(c, engine.url, "vllm:request_success_total")
            first = {r: n - warm.get(r, 0.0) for r, n in served.items()}
            assert sorted(first) == ["0", "1"] and all(first.values()), first  # both ranks served
            # Each first request published at least one BlockStored batch: all of them are in the index.
            await until_batches(c, router, batches + PREFIXES)
            hits_before = sum((await per_rank(c, engine.url, "vllm:prefix_cache_hits_total")).values())
            for p in prefixes:
                await ask(p, 1)
            done = await per_rank(c, engine.url, "vllm:request_success_total")
            hits = sum((await per_rank(c, engine.url, "vllm:prefix_cache_hits_total")).values())
        # Each follower ran where its prefix was cached: each rank served twice its first round, and every
        # follower hit at least its prefix's full blocks (a follower on the other rank would hit nothing).
        assert {r: done[r] - served[r] for r in done} == first
        assert hits - hits_before >= PREFIXES * (40 * BLOCK // BLOCK - 1) * BLOCK
    assert run.final.status == "stopped"


async def test_scaling_registers_drains_and_removes_every_rank_of_an_engine(tmp_path: Path) -> None:
    scaled = profile(
        tmp_path,
        router={"enabled": True, "policy": "round_robin"},
        autoscaler={"enabled": True, "both": {"min": 1, "max": 2}},
    )
    plan = build_plan(scaled, is_free=port_is_free, daemons=(router_specs,))  # no autoscaler: the test scales
    kept, spare = plan.specs[0], plan.reserve[0]
    router, control = plan.entrypoint.url, f"http://127.0.0.1:{plan.control_port}"
    async with (
        supervised(plan, HOLDING) as run,
        # Streams stay silent while the engines hang: a read timeout longer than any wait of the test.
        httpx.AsyncClient(timeout=120, trust_env=False, headers=admin_headers(plan)) as c,
    ):

        async def ids() -> set[str]:
            return {b["id"] for b in (await c.get(f"{router}/admin/backends")).json()["backends"]}

        async def units() -> dict[str, Any]:
            body: dict[str, Any] = (await c.get(f"{control}/scale")).json()["units"]["both"]
            return body

        assert await ids() == set(kept.backend_ids)
        assert (await c.put(f"{control}/scale/both", json={"replicas": 2})).status_code == 202

        async def two_ready() -> bool:
            return bool((await units())["ready"] == 2)

        await until(two_ready)
        assert await ids() == {*kept.backend_ids, *spare.backend_ids}
        assert [r["backends"] for r in (await units())["replicas"]] == [
            list(kept.backend_ids),
            list(spare.backend_ids),
        ]
        # Round robin over four ranks: two of the eight streams on each rank of the spare engine, held open
        # (the engines hang) until the test has seen both its ranks draining with them.
        streams = await held_streams(c, router, [kept, spare], 8)
        seen: dict[str, Any] = {}
        assert (await c.put(f"{control}/scale/both", json={"replicas": 1})).status_code == 202
        drained: set[str] = set()

        async def both_ranks_drained_with_streams() -> bool:
            seen["listed"] = listed = (await c.get(f"{router}/admin/backends")).json()["backends"]
            drained.update(b["id"] for b in listed if b["draining"] and b["inflight"] > 0)
            assert not drained - set(spare.backend_ids), seen  # the kept engine's ranks keep serving
            return drained == set(spare.backend_ids)

        await until(both_ranks_drained_with_streams, within=60, seen=seen)
        await hang(c, [kept, spare], on=False)
        assert await asyncio.gather(*streams) == [4000] * 8  # no stream cut by the scale-in

        async def one_left() -> bool:
            s = await units()
            return bool(s["ready"] == 1 and s["stopping"] == 0)

        await until(one_left)
        assert await ids() == set(kept.backend_ids)
    assert run.final.status == "stopped"
    assert [p.name for p in run.final.processes] == ["engine-0", "router"]


async def test_an_engine_scaled_out_has_every_ranks_kv_events_followed(tmp_path: Path) -> None:
    """The supervisor registers each rank with the engine's base endpoint; the router follows rank r at
    base + r, so the precise index covers engines added at run time too."""
    scaled = profile(tmp_path, autoscaler={"enabled": True, "both": {"min": 1, "max": 2}})
    plan = build_plan(scaled, is_free=port_is_free, daemons=(router_specs,))
    spare = plan.reserve[0]
    router, control = plan.entrypoint.url, f"http://127.0.0.1:{plan.control_port}"
    async with supervised(plan):
        async with httpx.AsyncClient(timeout=30, trust_env=False, headers=admin_headers(plan)) as c:
            assert (await c.put(f"{control}/scale/both", json={"replicas": 2})).status_code == 202

            async def two_ready() -> bool:
                return bool((await c.get(f"{control}/scale")).json()["units"]["both"]["ready"] == 2)

            await until(two_ready)
            kv = (await c.get(f"{router}/admin/policy")).json()["kv_sources"]
        followed = {s["endpoint"]: set(s["backends"]) for s in kv}
        for rank, key in enumerate(("kv_events", "kv_events.dp1")):
            assert followed.get(f"tcp://127.0.0.1:{spare.ports[key]}") == {f"{spare.url}#dp{rank}"}
