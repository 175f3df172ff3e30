"""Waiting for a router's KV-event subscriptions and batches by what its /metrics shows, not by fixed sleeps.

ZMQ's slow joiner: a PUB drops whatever it sends before a SUB's subscription has reached it, and how long
connecting takes depends on the machine's load. So a test first has each publisher (an engine, or one rank
of a data-parallel engine) serve warm-up requests of its own, sent straight to it, until the router has
applied a batch from it; later, it waits for the batches its requests published to be applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx

from infctl import tokens
from infctl.router.ranks import rank_pin
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

BATCHES = "infctl_router_kv_event_batches_total"
RESEND_S = 2.0
"""How long one warm-up's batch may take to reach the router before another is sent (one lost before the
subscription connected never arrives)."""


async def kv_batches(client: httpx.AsyncClient, router: str) -> float:
    """KV event batches the router at ``router`` has applied, from all its sources."""
    samples = parse_metrics((await client.get(f"{router}/metrics")).text, {BATCHES}).get(BATCHES, [])
    return sum(s.value for s in samples)


async def until_batches(
    client: httpx.AsyncClient, router: str, at_least: float, within: float = 60.0
) -> float:
    """Poll until the router has applied ``at_least`` batches; the count (AssertionError after ``within``)."""
    seen = 0.0
    try:
        async with asyncio.timeout(within):
            while (seen := await kv_batches(client, router)) < at_least:
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(
            f"the router applied {seen} KV event batches, not {at_least}, in {within} s"
        ) from None
    return seen


async def until_subscribed(
    client: httpx.AsyncClient,
    router: str,
    publishers: Sequence[Backend],
    *,
    model: str,
    engine: str = "vllm",
    within: float = 60.0,
) -> int:
    """For each publisher in turn (the backend whose events it publishes), send it warm-up requests straight
    to its engine (pinned to its rank) until the router's batch count rises; returns the warm-ups sent.

    Each warm-up's prompt (4 blocks of 16 tokens, one token out) is new, so it publishes a BlockStored batch,
    and shares no prefix with any test prompt. AssertionError after ``within`` seconds."""
    sent = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for backend in publishers:
        pin = rank_pin(backend, engine)
        before = await kv_batches(client, router)
        while True:
            assert loop.time() < deadline, (
                f"no KV event batch from {backend.id} reached the router in {within} s"
            )
            sent += 1
            body = {"model": model, "prompt": tokens.synth_words(64, salt=900_000 + sent), "max_tokens": 1}
            r = await client.post(
                f"{backend.url}/v1/completions", json={**body, **pin.body}, headers=pin.headers
            )
            assert r.status_code == 200, r.text
            resend = loop.time() + RESEND_S
            while loop.time() < resend and await kv_batches(client, router) <= before:
                await asyncio.sleep(0.02)
            if await kv_batches(client, router) > before:
                break
    return sent
