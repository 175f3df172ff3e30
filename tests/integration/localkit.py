"""What the local-target integration tests share: a profile of simulated vLLM engines, supervisor settings
quick enough for a test, a supervisor running a plan for the length of a ``with`` block, the release's admin
headers, a polling wait and a counted stream.

Imported by name (``from localkit import FAST, supervised``): pytest puts a test's own folder on sys.path,
which is this one for tests/integration/*.py; tests/integration/autoscaler/conftest.py adds it for its folder.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from infctl.config import DeploymentProfile
from infctl.local import LocalPlan, ProcessSpec, RunState, SupervisorSettings, serve
from infctl.local.admin_token import token_path

FAST = SupervisorSettings(
    health_timeout=20,
    health_interval=0.05,
    grace_period=3,
    backoff_initial=0.1,
    reconcile_interval=0.1,
    drain_timeout=20,
)
"""Quick probes, restarts, reconciles and drains; generous health and drain deadlines for a loaded machine."""

HOLDING = replace(FAST, drain_timeout=120)
"""FAST, with a drain deadline beyond any wait of a test that holds streams open (:func:`hang`): its drain
must see them end, not give up on them and cut them."""


PORTS_LOW, PORTS_HIGH = 10_000, 32_000
"""Where the releases' fixed ports go: below the kernel's ephemeral range (Linux's default starts at 32768).
A port probed free up there can be taken by any process's outgoing connection before the engine or router
planned on it binds it (a router failed with EADDRINUSE on 39148 that way while other tests ran)."""


def fixed_ports(base_port: int) -> int:
    """``base_port`` plus a per-process offset (concurrent runs keep apart), kept within [PORTS_LOW,
    PORTS_HIGH) with room for a release's ports above it."""
    span = PORTS_HIGH - PORTS_LOW - 200
    return PORTS_LOW + (base_port - PORTS_LOW + (os.getpid() * 13) % 20000) % span


def local_profile(
    tmp_path: Path, name: str, *, base_port: int, model: dict[str, Any], **fields: Any
) -> DeploymentProfile:
    """An aggregated local release of one simulated vLLM engine serving model ``m`` (``model`` adds to its
    model section: ``sim`` and the rest; ``fields`` to the top level, ``mode`` included: a PD layout drops
    ``replicas``). Ports from :func:`fixed_ports`, the run directory in ``tmp_path``."""
    data: dict[str, Any] = {
        "name": name,
        "target": "local",
        "mode": "aggregated",
        "replicas": 1,
        "model": {"engine": "vllm", "model": "m", "served_model_name": "m", **model},
        "local": {"base_port": fixed_ports(base_port), "run_dir": str(tmp_path)},
        **fields,
    }
    if data["mode"] != "aggregated":
        del data["replicas"]
    return DeploymentProfile.model_validate(data)


@dataclass
class Supervised:
    """A supervisor started by :func:`supervised`; its last state once the ``with`` block has ended."""

    plan: LocalPlan
    ended: RunState | None = None

    @property
    def final(self) -> RunState:
        assert self.ended is not None, "the supervisor runs until its with block ends"
        return self.ended


@asynccontextmanager
async def supervised(
    plan: LocalPlan, settings: SupervisorSettings = FAST, *, ready_within: float = 30
) -> AsyncIterator[Supervised]:
    """Serve ``plan`` in this event loop, enter once every process is healthy, stop everything on exit."""
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(plan, settings, ready=ready, stop=stop))
    run = Supervised(plan)
    try:
        await asyncio.wait_for(ready.wait(), ready_within)
        yield run
    finally:
        stop.set()
        run.ended = await task


def admin_headers(plan: LocalPlan) -> dict[str, str]:
    """The bearer token the supervisor generated for the release, which the router's admin API wants."""
    return {"authorization": f"Bearer {token_path(plan).read_text().strip()}"}


async def until(
    check: Callable[[], Awaitable[bool]], within: float = 20.0, seen: Mapping[str, object] | None = None
) -> None:
    """Poll ``check`` every 50 ms until it is true; after ``within`` seconds fail (``AssertionError``) with
    its name and ``seen``: what the check last observed, when it records that there."""
    try:
        async with asyncio.timeout(within):
            while not await check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        name = getattr(check, "__name__", repr(check))
        raise AssertionError(f"{name} still false after {within} s; last seen: {seen}") from None


async def stream(client: httpx.AsyncClient, url: str, tokens: int) -> int:
    """Stream exactly ``tokens`` tokens of model ``m`` from ``url``; returns the data chunks received."""
    body = {"model": "m", "prompt": "hello " * 20, "max_tokens": tokens, "stream": True, "ignore_eos": True}
    chunks = 0
    async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            chunks += line.startswith("data: {")
    return chunks


async def hang(client: httpx.AsyncClient, specs: Iterable[ProcessSpec], on: bool) -> None:
    """Hang (``on``) or resume every simulated engine among ``specs`` (``/admin/faults``): a hung engine
    accepts requests and answers its health probes but runs no step, so the streams it holds stay open,
    however slow the machine, until it resumes and serves them whole."""
    for spec in specs:
        if spec.kind == "engine":
            resp = await client.post(f"{spec.url}/admin/faults", json={"hang": on})
            assert resp.status_code == 200, (spec.name, resp.status_code, resp.text)


async def inflight(client: httpx.AsyncClient, router: str) -> dict[str, int]:
    """Requests in flight on each of the router's backends, by backend id."""
    listed = (await client.get(f"{router}/admin/backends")).json()["backends"]
    return {b["id"]: int(b["inflight"]) for b in listed}


async def held_streams(
    client: httpx.AsyncClient, router: str, specs: Iterable[ProcessSpec], n: int, tokens: int = 4000
) -> list[asyncio.Task[int]]:
    """Hang ``specs``, open ``n`` streams through ``router`` and wait (60 s) until the router counts them all
    in flight: they stay open until the caller unhangs the engines."""
    await hang(client, specs, on=True)
    streams = [asyncio.create_task(stream(client, router, tokens)) for _ in range(n)]
    seen: dict[str, Any] = {}

    async def all_routed() -> bool:
        seen["inflight"] = counts = await inflight(client, router)
        return sum(counts.values()) >= n

    await until(all_routed, within=60, seen=seen)
    return streams
