"""SGLang PD with a simulated data-parallel prefill engine whose backends were given a wrong rank count, or
none: the router reads the engine's own count from its ``/server_info`` and draws each prefill leg's
bootstrap room for it, so every leg pinned to rank r runs on rank r (``room % ranks == r``).

The simulated SGLang prefill serves a request on rank ``bootstrap_room % ranks`` and fails a leg pinned to
another rank, as 0.5.15 does ("follow_bootstrap_room conflict", ``infctl.sim.personality.sglang``); its
decode fails with it. 3 ranks given as 4 put most legs on the wrong rank; 3 given as none would be served
by the fallback stride (3 divides it) but counted as rooms drawn without a known count.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from infctl.router.snapshot import Backend
from infctl.sim.dp import DPEngine
from infctl.sim.personality.sglang import SglangPersonality
from infctl.telemetry.prometheus import parse_metrics, value

RANKS = 3
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def listed(c: httpx.AsyncClient, url: str) -> dict[str, dict[str, object]]:
    return {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}


async def ready(c: httpx.AsyncClient, url: str, deadline_s: float = 60.0) -> dict[str, dict[str, object]]:
    """Until every backend is scraped (before that it counts as saturated) and the prefill engine's rank
    count is read, or the deadline passes (then the test fails on what the router did)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        rows = await listed(c, url)
        scraped = all(b["signals_age_s"] is not None for b in rows.values())
        read = all(b.get("dp_size_engine") is not None for i, b in rows.items() if i.startswith("p"))
        if (scraped and read) or loop.time() > end:
            return rows
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("given", [4, None])
async def test_prefill_rooms_follow_the_engine_s_rank_count(
    given: int | None, start_sim: Any, start_router: Any
) -> None:
    sim = await start_sim(
        personality="sglang",
        instances=2,
        roles=("prefill", "decode"),
        data_parallel_size=RANKS,
        pd_wait_timeout=5.0,
    )
    prefill, decode = sim.instances
    assert isinstance(prefill, DPEngine)
    persona = prefill.ranks[0].personality
    assert isinstance(persona, SglangPersonality)
    port = persona.bootstrap_port
    backends = [
        Backend(id=f"p{r}", url=prefill.url, role="prefill", group="g0", engine="sglang", dp_rank=r,
                dp_size=given, bootstrap_port=port)
        for r in range(RANKS)
    ]  # fmt: skip
    backends.append(Backend(id="d", url=decode.url, role="decode", group="g0", engine="sglang"))
    url = await start_router(backends, engine="sglang", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=30) as c:
        rows = await ready(c, url)
        answers = []
        for rank in range(RANKS):  # each rank in turn, the others drained
            for r in range(RANKS):
                drain = {"draining": r != rank}
                assert (await c.post(f"{url}/admin/backends/p{r}/drain", json=drain)).status_code == 200
            for i in range(3):
                prompt = " ".join(f"r{rank}i{i}w{j}" for j in range(200))
                body = {"model": MODEL, "prompt": prompt, "max_tokens": 2}
                answers.append(await c.post(f"{url}/v1/completions", json=body))
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
        served = [
            value(parse_metrics(r.personality.render_metrics()), "sglang:prompt_tokens_total")
            for r in prefill.ranks
        ]
    assert [a.status_code for a in answers] == [200] * len(answers), [a.text for a in answers]
    assert value(metrics, "infctl_router_retries_total") == 0
    assert all(n for n in served), served  # every rank ran its own legs
    assert value(metrics, "infctl_router_pd_rooms_without_dp_size_total") in (0, None)
    for r in range(RANKS):
        row = rows[f"p{r}"]
        assert (row["dp_size"], row["dp_size_given"], row["dp_size_engine"]) == (RANKS, given, RANKS)
