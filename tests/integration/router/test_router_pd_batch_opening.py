"""A PD batch's decode leg whose stream opens with a 5xx error event (vLLM 0.32's answer when a decode cannot
load its KV: 200, then ``data: {"error": {..., "code": 500}}``; ``infctl.router.opening``) while the client
has nothing: the batch's try failed, as a decode's 500 after its prefill did (the KV transfer suspected:
``proxy``), so the batch is retried (without that prefill, then on another decode), or, with none left, the
client gets the router's 502; never a 200 stream holding only the engine's error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from test_router_resume_opening import ENGINE_ERROR, ErringEngine, erring  # noqa: F401 - the fixture

from infctl import tokens
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
OUTPUT = 4


def batch(salt: int) -> list[str]:
    return [tokens.synth_words(n, salt=salt + i) for i, n in enumerate((40, 100))]


async def post_batch(c: httpx.AsyncClient, url: str, salt: int) -> httpx.Response:
    body = {"model": MODEL, "prompt": batch(salt), "max_tokens": OUTPUT, "stream": True}
    return await c.post(f"{url}/v1/completions", json=body)


async def test_a_batch_whose_decode_leg_opens_with_an_error_event_goes_to_another_decode(
    start_sim: Any,
    start_router: Any,
    erring: ErringEngine,  # noqa: F811
) -> None:
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.urls
    fleet = [
        Backend(id="p", url=prefill, role="prefill", group="g0"),
        Backend(id="d", url=decode, role="decode", group="g0"),
        Backend(id="erring", url=erring.url, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", policy="round_robin", pd_min_uncached_tokens=16)
    answers: list[httpx.Response] = []
    async with httpx.AsyncClient(timeout=30) as c, asyncio.timeout(120):  # a guard, not a measurement
        while not decode_legs(erring):
            answers.append(await post_batch(c, url, salt=100 * len(answers)))
    for answer in answers:
        assert answer.status_code == 200, answer.text
        events = [e[6:] for e in answer.text.split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "[DONE]", answer.text
        chunks = [json.loads(e) for e in events[:-1]]
        assert not [c for c in chunks if "error" in c], answer.text
        texts: dict[int, str] = {}
        for chunk in chunks:
            for choice in chunk["choices"]:
                texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
        assert sorted(texts) == [0, 1] and all(len(t.split()) == OUTPUT for t in texts.values()), texts


async def test_a_batch_whose_only_decode_opens_with_an_error_event_gets_the_routers_502(
    start_sim: Any,
    start_router: Any,
    erring: ErringEngine,  # noqa: F811
) -> None:
    prefill = (await start_sim(personality="vllm", roles=("prefill",))).urls[0]
    fleet = [
        Backend(id="p", url=prefill, role="prefill", group="g0"),
        Backend(id="erring", url=erring.url, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=30) as c:
        answer = await post_batch(c, url, salt=0)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert answer.status_code == 502, answer.text
    message = answer.json()["error"]["message"]
    assert "erring: HTTP 200 stream opened with a 500 error event" in message, message
    assert ENGINE_ERROR in message
    # The batch's legs first (failed: the prefill suspected), then the batch alone (failed: no decode left).
    assert [bool(b.get("kv_transfer_params")) for b in erring.seen] == [True, True, False]
    failures = {(s.labels["prefill"], s.labels["decode"]): s.value
                for s in metrics["infctl_router_pd_transfer_failures_total"]}  # fmt: skip
    assert failures == {("p", "erring"): 1}


def decode_legs(engine: ErringEngine) -> int:
    """The PD decode legs ``engine`` was sent (a batch's: one per prompt, with its ``kv_transfer_params``)."""
    return sum(bool(b.get("kv_transfer_params")) for b in engine.seen)
