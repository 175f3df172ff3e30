"""SGLang decode engines are never sent a request without its prefill leg.

The router's backends come from a router file (``engine: sglang``), as ``infctl router -f`` builds them, in
front of ``infctl sim --personality sglang`` PD engines, whose decode refuses a request without
``bootstrap_room`` exactly as SGLang's scheduler does (HTTP 400). Prompts far below
``pd_min_uncached_tokens`` are the ones a vLLM decode engine would serve alone: here each one is paired with
the prefill, or, with no prefill live, served by an aggregated engine or answered 503."""

from __future__ import annotations

from typing import Any

import httpx
from test_router_pd_bootstrap import scraped

from infctl.config.router import RouterFile
from infctl.router.config import from_file
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SHORT = {"model": MODEL, "prompt": "tell me a short story", "max_tokens": 4}
"""5 prompt tokens, far under the router's pd_min_uncached_tokens (512)."""


def backends(urls: list[str], roles: tuple[str, ...]) -> list[Any]:
    entries = [
        {"id": role, "url": url, "role": role, **({"bootstrap_port": 8998} if role == "prefill" else {})}
        for url, role in zip(urls, roles, strict=True)
    ]
    return list(from_file(RouterFile.model_validate({"engine": "sglang", "backends": entries})).backends)


async def prompt_tokens(c: httpx.AsyncClient, url: str) -> float:
    return value(parse_metrics((await c.get(f"{url}/metrics")).text), "sglang:prompt_tokens_total")


async def test_a_short_prompt_is_paired_with_the_prefill(start_sim: Any, start_router: Any) -> None:
    roles = ("prefill", "decode")
    sim = await start_sim(personality="sglang", instances=2, roles=roles)
    url = await start_router(backends(sim.urls, roles), engine="sglang")
    async with httpx.AsyncClient(timeout=30) as c:
        await scraped(c, url)
        plain = await c.post(f"{url}/v1/completions", json=SHORT)
        streamed = await c.post(f"{url}/v1/completions", json={**SHORT, "stream": True})
        chat = await c.post(
            f"{url}/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        )
        listed = {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}
        prefilled = await prompt_tokens(c, sim.urls[0])
    for answer in (plain, streamed, chat):
        assert answer.status_code == 200, answer.text
    assert '"error"' not in streamed.text and streamed.text.rstrip().endswith("data: [DONE]")
    usage = plain.json()["usage"]
    # The decode engine got the whole prompt's KV at its rendezvous: the prefill engine ran it.
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] == 5
    assert prefilled is not None and prefilled >= 5
    assert listed["decode"]["decode_can_prefill"] is False


async def test_with_no_prefill_live_an_aggregated_engine_or_a_503_answers(
    start_sim: Any, start_router: Any
) -> None:
    roles = ("prefill", "decode", "both")
    sim = await start_sim(personality="sglang", instances=3, roles=roles)
    url = await start_router(backends(sim.urls, roles), engine="sglang")
    async with httpx.AsyncClient(timeout=30) as c:
        await scraped(c, url)
        assert (
            await c.post(f"{url}/admin/backends/prefill/drain", json={"draining": True})
        ).status_code == 200
        before = await prompt_tokens(c, sim.urls[2])
        served = await c.post(f"{url}/v1/completions", json=SHORT)
        after = await prompt_tokens(c, sim.urls[2])
        assert (await c.post(f"{url}/admin/backends/both/drain", json={"draining": True})).status_code == 200
        refused = await c.post(f"{url}/v1/completions", json={**SHORT, "stream": True})
        decoded = await prompt_tokens(c, sim.urls[1])
    assert served.status_code == 200, served.text
    assert (after or 0) - (before or 0) == 5  # the aggregated engine served it whole
    assert refused.status_code == 503
    assert refused.json()["error"]["message"].startswith("no prefill backend")
    assert not decoded  # the decode engine never saw either request
