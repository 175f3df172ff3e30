"""The daemon says where /metrics listens once it does: the port bound, not the 0 it was asked for."""

from __future__ import annotations

import asyncio

import httpx
from policykit import aggregated

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.fleet import Fleet
from infctl.autoscaler.snapshot import UnitStatus


class IdleActuator:
    async def observe(self) -> Fleet:
        return Fleet(units={"both": UnitStatus(1, 1)}, replicas=())

    async def scale(self, unit: str, replicas: int) -> None:
        raise AssertionError("nothing to scale")


async def test_port_0_is_announced_as_the_port_the_system_picked() -> None:
    """The start-up line read `metrics on http://127.0.0.1:0/metrics`, printed before anything listened."""
    cfg = AutoscalerConfig(policy=aggregated(), interval_s=0.01, port=0, dry_run=True)
    stop, heard = asyncio.Event(), []

    def on_listening(url: str | None) -> None:
        heard.append(url)
        stop.set()

    await asyncio.wait_for(serve(cfg, IdleActuator(), stop=stop, on_listening=on_listening), 30)
    (url,) = heard
    assert url is not None and url.startswith("http://127.0.0.1:") and not url.endswith(":0")


async def test_the_announced_url_serves_metrics() -> None:
    cfg = AutoscalerConfig(policy=aggregated(), interval_s=0.01, port=0, dry_run=True)
    stop, ready, heard = asyncio.Event(), asyncio.Event(), []
    task = asyncio.create_task(serve(cfg, IdleActuator(), ready=ready, stop=stop, on_listening=heard.append))
    await asyncio.wait_for(ready.wait(), 30)
    async with httpx.AsyncClient(trust_env=False) as c:
        text = (await c.get(f"{heard[0]}/metrics")).text
    stop.set()
    await task
    assert "infctl_autoscaler_dry_run 1" in text
