"""The whole local stack with simulated engines, the router and ``infctl autoscaler`` as supervised processes:
a load step scales out, a quiet period scales in, and no request fails on the way (drain before removal).

The engines run a hundred times faster than real time and the autoscaler's clock with them
(``--time-scale 0.01``): its 300 s scale-down window lasts 3 s here.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from localkit import local_profile, supervised

from infctl.config import DeploymentProfile
from infctl.local import build_plan, port_is_free


def profile(tmp_path: Path) -> DeploymentProfile:
    return local_profile(
        tmp_path,
        "auto",
        base_port=31000,
        model={
            "sim": {
                "profile": "llama3-8b-h100",
                "num_gpu_blocks": 512,
                "block_size": 16,
                "max_num_seqs": 4,
                "speedup": 100,
            },
        },
        router={"enabled": True, "policy": "round_robin"},
        autoscaler={"enabled": True, "both": {"min": 1, "max": 3}, "interval_s": 20},
    )


class Load:
    """Closed-loop clients: each sends its next request when the previous one ends."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client, self.url = client, url
        self.outcomes: Counter[str] = Counter()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self, clients: int, *, tokens: int, stream: bool) -> list[asyncio.Task[None]]:
        new = [asyncio.create_task(self._client(tokens, stream)) for _ in range(clients)]
        self.tasks += new
        return new

    async def _client(self, tokens: int, stream: bool) -> None:
        body = {
            "model": "m",
            "prompt": "load " * 40,
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": stream,
        }
        while True:
            try:
                async with self.client.stream("POST", f"{self.url}/v1/completions", json=body) as resp:
                    text = (await resp.aread()).decode()
                ok = resp.status_code == 200 and (not stream or text.rstrip().endswith("data: [DONE]"))
                self.outcomes["ok" if ok else f"http {resp.status_code}: {text[:80]}"] += 1
            except httpx.HTTPError as err:
                self.outcomes[f"{type(err).__name__}"] += 1

    @staticmethod
    async def stop(tasks: list[asyncio.Task[None]]) -> None:
        # Clients stop between requests only, so no request is abandoned mid-way.
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def units(client: httpx.AsyncClient, control: str) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get(f"{control}/scale")).json()["units"]["both"]
    return body


async def wait_for(client: httpx.AsyncClient, control: str, done: Any, within: float) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while not done(state := await units(client, control)):
            await asyncio.sleep(0.1)
    return state


async def test_load_step_scales_out_and_quiet_scales_in_without_failing_a_request(tmp_path: Path) -> None:
    plan = build_plan(profile(tmp_path), is_free=port_is_free)
    assert [s.kind for s in plan.specs] == ["engine", "router", "autoscaler"]
    control = f"http://127.0.0.1:{plan.control_port}"
    scaler = plan.specs[-1]
    async with supervised(plan, ready_within=40), httpx.AsyncClient(timeout=60, trust_env=False) as c:
        load = Load(c, plan.entrypoint.url)
        trickle = load.start(1, tokens=1500, stream=True)  # streams in flight through both phases
        step = load.start(40, tokens=600, stream=False)
        out = await wait_for(c, control, lambda s: s["ready"] >= 2, within=60)
        assert out["desired"] >= 2
        await Load.stop(step)
        # Scaled in: one engine asked for, drained and stopped (desired can drop a moment before the drain
        # starts, so all three are awaited together).
        quiet = await wait_for(
            c, control, lambda s: s["desired"] == 1 and s["stopping"] == 0 and s["ready"] == 1, within=60
        )
        assert quiet["ready"] == 1
        await Load.stop(trickle)
        metrics = (await c.get(f"{scaler.url}/metrics")).text
    assert set(load.outcomes) == {"ok"}, load.outcomes
    assert load.outcomes["ok"] > 50
    assert 'infctl_autoscaler_scale_events_total{unit="both",direction="up"}' in metrics
    assert 'infctl_autoscaler_scale_events_total{unit="both",direction="down"}' in metrics
