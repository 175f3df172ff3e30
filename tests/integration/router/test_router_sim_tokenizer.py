"""Router and simulated engines on one real tokenizer: the precise index matches Chinese prompts.

The engines (``infctl sim --tokenizer PATH``) publish KV events carrying the tokenizer's ids; the router
(``--tokenizer PATH``) tokenizes prompts to the same ids, so a repeated Chinese system prompt is found where
its blocks live. With the estimate the router's ids are not the engine's, and it predicts no cached prefix.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kvkit import kv_batches, until_batches, until_subscribed
from tokenizerkit import chinese, tiny_tokenizer

from infctl.router.kv_events import KVSource
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics
from infctl.tokenization import load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
POLICY = {"preset": "prefix_precise", "settings": {"speculative_ttl_s": 0.0, "stale_after_s": 30.0}}
"""No speculative entries: the index knows only what the engines' KV events told it."""


def estimated(metrics: str) -> float:
    samples = parse_metrics(metrics).get("infctl_router_estimated_cached_tokens_total", [])
    return sum(s.value for s in samples)


@pytest.mark.parametrize("router_tokenizer", ["same", "estimate"])
async def test_a_repeated_chinese_system_prompt_hits_the_precise_index(
    start_sim: StartSim, start_router: StartRouter, tiny_tokenizer: Path, router_tokenizer: str
) -> None:
    path = str(tiny_tokenizer)
    sims = [await start_sim(kv_events_port=0, tokenizer=path) for _ in range(2)]
    backends = [Backend(id=s.urls[0], url=s.urls[0]) for s in sims]
    sources = tuple(
        KVSource(endpoint=s.instances[0].kv_endpoint.replace("*", "127.0.0.1"), backends={None: s.urls[0]})
        for s in sims
    )
    url = await start_router(
        backends,
        policy=POLICY,
        kv_sources=sources,
        tokenizer=path if router_tokenizer == "same" else "estimate",
    )
    tok = load_tokenizer(path)
    systems = [chinese(random.Random(k), 400) for k in range(3)]
    async with httpx.AsyncClient(timeout=30) as c:
        await until_subscribed(c, url, backends, model=MODEL)

        async def ask(system: str, question: str) -> int:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            r = await c.post(
                f"{url}/v1/chat/completions", json={"model": MODEL, "messages": messages, "max_tokens": 2}
            )
            assert r.status_code == 200, r.text
            usage = r.json()["usage"]
            assert usage["prompt_tokens"] == len(tok.chat_ids(messages))
            return int(usage["prompt_tokens_details"]["cached_tokens"])

        before = await kv_batches(c, url)
        for system in systems:
            await ask(system, "第一个问题")
        await until_batches(c, url, before + len(systems))  # the engines' BlockStored batches are applied
        start = estimated((await c.get(f"{url}/metrics")).text)
        # Only the precise index sends every follow-up where its system prompt lives (6 coin flips).
        cached = [await ask(system, f"另一个问题{j}") for system in systems for j in range(2)]
        predicted = estimated((await c.get(f"{url}/metrics")).text) - start
    shared = min(len(tok.encode(s, special=False)) for s in systems)  # each system prompt's own tokens
    if router_tokenizer == "same":
        assert all(n >= shared - 16 for n in cached), (cached, shared)
        # The router's prediction is what the engines found, within a block per request.
        assert abs(predicted - sum(cached)) <= 16 * len(cached), (predicted, cached)
    else:
        assert predicted == 0  # estimate ids never equal the engine's: no block ever matches
