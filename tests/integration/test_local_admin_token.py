"""A local release's router requires the admin token the supervisor generated and kept for the operator."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import httpx
from localkit import fixed_ports

from infctl.config import load_deployment
from infctl.local import SupervisorSettings, build_plan, port_is_free, serve
from infctl.local.admin_token import token_path

PROFILE = """\
name: guarded
target: local
mode: aggregated
replicas: 1
model:
  engine: vllm
  model: meta-llama/Llama-3.1-8B-Instruct
  served_model_name: llama3-8b
  sim:
    profile: llama3-8b-h100
    speedup: 100
local:
  base_port: {port}
  run_dir: {run_dir}
  simulate: true
"""

FAST = SupervisorSettings(health_timeout=20, health_interval=0.05, grace_period=3)


async def test_the_local_router_answers_its_admin_api_only_with_the_saved_token(tmp_path: Path) -> None:
    path = tmp_path / "guarded.yaml"
    path.write_text(PROFILE.format(port=fixed_ports(26000), run_dir=tmp_path / "run"))
    plan = build_plan(load_deployment(path), is_free=port_is_free)
    assert all("INFCTL_ROUTER_ADMIN_TOKEN" not in s.env for s in plan.specs)  # never in plan.json
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(plan, FAST, ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        saved = token_path(plan)
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        token = saved.read_text().strip()
        admin = f"{plan.entrypoint.url}/admin/backends"
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(admin)).status_code == 401
            wrong = await client.get(admin, headers={"authorization": "Bearer nope"})
            assert wrong.status_code == 401
            right = await client.get(admin, headers={"authorization": f"Bearer {token}"})
            assert right.status_code == 200 and len(right.json()["backends"]) == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    # The next run of the release keeps the token (scripts that read it once keep working).
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(plan, FAST, ready=ready, stop=stop))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with httpx.AsyncClient(trust_env=False) as client:
            again = await client.get(admin, headers={"authorization": f"Bearer {token}"})
            assert again.status_code == 200
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
