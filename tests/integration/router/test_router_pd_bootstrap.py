"""SGLang PD with two prefill engines on one host: each has its own bootstrap port, and the router sends
each request the port of the prefill it chose. The simulated decode meets its room's prefill at the port
the request names (``infctl.sim.personality.pd.BootstrapRegistry``), as SGLang's does, so a request
naming the wrong prefill's port waits for KV that never comes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BASE = 8998
"""The simulator's first bootstrap port (``SimSettings.bootstrap_port``): instance i reports BASE + i."""


def fleet(urls: list[str], ports: tuple[int | None, int | None]) -> list[Backend]:
    p0, p1, decode = urls
    return [
        Backend(id="p0", url=p0, role="prefill", group="g0", bootstrap_port=ports[0]),
        Backend(id="p1", url=p1, role="prefill", group="g0", bootstrap_port=ports[1]),
        Backend(id="d", url=decode, role="decode", group="g0"),
    ]


@dataclass
class Seen:
    answers: list[httpx.Response]
    prefilled: list[float | None]
    """Prompt tokens each prefill engine ran (its own counter)."""
    listed: dict[str, Any]
    """The router's admin view of its backends, by id."""
    retries: float | None


async def scraped(c: httpx.AsyncClient, url: str, deadline_s: float = 60.0) -> None:
    """Until the router has read every backend's signals: before that a backend counts as saturated and
    would be passed over (a loaded machine delays the first scrapes)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
        if all(b["signals_age_s"] is not None for b in listed):
            return
        assert loop.time() < end, f"not every backend scraped after {deadline_s} s: {listed}"
        await asyncio.sleep(0.05)


async def twice_on_each_prefill(c: httpx.AsyncClient, url: str) -> list[httpx.Response]:
    """Two requests through the router on prefill ``p0``, then two on ``p1`` (the other one drained
    meanwhile), whatever the policy would pick, once the router has scraped every backend."""
    await scraped(c, url)
    answers = []
    for i, (use, spare) in enumerate((("p0", "p1"), ("p0", "p1"), ("p1", "p0"), ("p1", "p0"))):
        for bid, draining in ((spare, True), (use, False)):
            r = await c.post(f"{url}/admin/backends/{bid}/drain", json={"draining": draining})
            assert r.status_code == 200, r.text
        prompt = " ".join(f"r{i}w{j}" for j in range(400))
        body = {"model": MODEL, "prompt": prompt, "max_tokens": 4}
        answers.append(await c.post(f"{url}/v1/completions", json=body))
    return answers


async def run(start_sim: Any, start_router: Any, ports: tuple[int | None, int | None], wait: float) -> Seen:
    sim = await start_sim(personality="sglang", instances=3, roles=("prefill", "prefill", "decode"),
                          pd_wait_timeout=wait)  # fmt: skip
    url = await start_router(fleet(sim.urls, ports), engine="sglang", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=30) as c:
        answers = await twice_on_each_prefill(c, url)
        prefilled = [
            value(parse_metrics((await c.get(f"{p}/metrics")).text), "sglang:prompt_tokens_total")
            for p in sim.urls[:2]
        ]
        listed = {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    return Seen(answers, prefilled, listed, value(metrics, "infctl_router_retries_total"))


async def test_each_prefill_is_met_at_its_own_bootstrap_port(start_sim: Any, start_router: Any) -> None:
    seen = await run(start_sim, start_router, (BASE, BASE + 1), wait=30)
    assert all(a.status_code == 200 for a in seen.answers), [a.text for a in seen.answers]
    # Every decode got its whole prompt's KV from the rendezvous (no modelled transfer, no local prefill).
    usages = [a.json()["usage"] for a in seen.answers]
    assert all(u["prompt_tokens_details"]["cached_tokens"] == u["prompt_tokens"] for u in usages)
    assert all(n is not None and n > 0 for n in seen.prefilled)
    assert seen.retries == 0
    assert [seen.listed[b]["bootstrap_port"] for b in ("p0", "p1", "d")] == [BASE, BASE + 1, None]


async def test_one_port_for_both_prefills_strands_the_second_ones_decodes(
    start_sim: Any, start_router: Any
) -> None:
    # What a router with the profile's single port did: requests prefilled on p1 name p0's bootstrap
    # server, their decode waits there in vain and the router has to retry them.
    seen = await run(start_sim, start_router, (None, None), wait=0.5)
    assert seen.retries or any(a.status_code != 200 for a in seen.answers)
