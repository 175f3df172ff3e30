"""Empty the engines' prefix caches the way each engine allows it (its adapter's ``cache_reset``): what the
comparisons do before each arm, so that no arm starts on the cache the one before it warmed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from infctl.engines import EngineAdapter
from infctl.engines.base import CacheResetOutcome
from infctl.errors import EngineError

SETTLE_S = 10.0
"""How long an engine that holds requests may take to let go of them before its reset counts as failed."""
RETRY_S = 0.2
"""Pause between two calls to a busy engine."""


async def reset_prefix_caches(
    client: httpx.AsyncClient,
    targets: Mapping[str, EngineAdapter],
    *,
    settle_s: float = SETTLE_S,
    retry_s: float = RETRY_S,
) -> None:
    """Reset the prefix cache of every engine in ``targets`` (URL -> its adapter). An engine still holding
    requests is asked again every ``retry_s`` for up to ``settle_s``.

    Raises EngineError naming every engine that does not serve its reset (a vLLM started without dev mode
    answers 404), with the fix; else one still busy after ``settle_s``, or one that refused otherwise."""
    outcomes = await asyncio.gather(
        *(_reset(client, url, adapter, settle_s, retry_s) for url, adapter in targets.items())
    )
    absent = [url for url, (outcome, _) in zip(targets, outcomes, strict=True) if outcome == "absent"]
    if absent:
        spec = targets[absent[0]].cache_reset
        raise EngineError(
            f"{', '.join(absent)}: {spec.method} {spec.path} answered 404, so the benchmark cannot empty "
            f"{'its' if len(absent) == 1 else 'their'} prefix cache before each arm",
            hint=spec.absent_fix or None,
        )
    for url, (outcome, detail) in zip(targets, outcomes, strict=True):
        spec = targets[url].cache_reset
        if outcome == "busy":
            raise EngineError(
                f"{url}: {spec.method} {spec.path} left the prefix cache as it was for {settle_s:g} s: "
                "requests still hold its blocks",
                hint="let the engine's requests finish (is another client using it?) and run again",
            )
        if outcome == "refused":
            raise EngineError(f"{url}: {spec.method} {spec.path} refused the prefix-cache reset: {detail}")


async def _reset(
    client: httpx.AsyncClient, url: str, adapter: EngineAdapter, settle_s: float, retry_s: float
) -> tuple[CacheResetOutcome, str]:
    spec = adapter.cache_reset
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle_s
    while True:
        try:
            resp = await client.request(spec.method, f"{url}{spec.path}")
        except httpx.HTTPError as exc:
            raise EngineError(
                f"{url}: {spec.method} {spec.path} failed: {exc!r}", hint="is the engine running?"
            ) from exc
        outcome = spec.outcome(resp.status_code, resp.content)
        if outcome != "busy" or loop.time() + retry_s > deadline:
            return outcome, f"{resp.status_code} {resp.text[:200]}"
        await asyncio.sleep(retry_s)
