"""Doctor on a data-parallel engine: every rank's KV events are checked, each on its own port."""

from __future__ import annotations

import pytest

from infctl.doctor.engine_probe import check_engine
from infctl.doctor.targets import EngineTarget
from infctl.telemetry import make_client


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_each_data_parallel_rank_publishes_kv_events_on_its_port(start_sim, personality: str) -> None:
    cluster = await start_sim(personality=personality, model="m1", kv_events_port=0, data_parallel_size=2)
    url = cluster.urls[0]
    target = EngineTarget(url, model="m1", kv_events=cluster.instances[0].kv_endpoint, data_parallel_size=2)
    async with make_client(None, timeout=5.0) as client:
        found = [r for r in await check_engine(client, target, kv_wait_s=1.5) if r.name == "kv events"]
    assert [r.target for r in found] == [f"{url}#dp0", f"{url}#dp1"]
    assert [r.status for r in found] == ["pass", "pass"], found
    ports = {r.summary.split(":")[2] for r in found}  # tcp://127.0.0.1:PORT: batch ...
    assert len(ports) == 2
