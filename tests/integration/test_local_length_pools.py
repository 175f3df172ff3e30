"""The shipped length-pool profile on the local target: engines labelled with their pools, the router given
one bucket per pool, and each prompt served by its own pool."""

from __future__ import annotations

from pathlib import Path

import httpx
from localkit import admin_headers, fixed_ports, supervised

from infctl.config import load_deployment
from infctl.local import build_plan, port_is_free

PROFILE = Path(__file__).parents[2] / "profiles" / "local-length-pools.yaml"


async def _served(client: httpx.AsyncClient, router: str, headers: dict[str, str]) -> dict[str, int]:
    """Requests served so far per pool, from the router's own count per backend."""
    listed = (await client.get(f"{router}/admin/backends", headers=headers)).json()["backends"]
    out: dict[str, int] = {}
    for b in listed:
        out[b["pool"]] = out.get(b["pool"], 0) + int(b["served"])
    return out


async def test_each_prompt_goes_to_its_length_pool(tmp_path: Path) -> None:
    base = fixed_ports(27000)
    profile = load_deployment(
        PROFILE,
        [
            f"local.base_port={base}",
            f"router.port={base + 50}",
            f"local.run_dir={tmp_path}",
            "model.sim.speedup=100",
        ],
    )
    plan = build_plan(profile, is_free=port_is_free)
    engines = [s for s in plan.specs if s.kind == "engine"]
    assert [(s.name, s.pool) for s in engines] == [
        ("engine-short-0", "short"),
        ("engine-short-1", "short"),
        ("engine-long-0", "long"),
        ("engine-long-1", "long"),
    ]
    router = plan.entrypoint.url
    async with supervised(plan, ready_within=90):
        headers = admin_headers(plan)
        async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
            policy = (await client.get(f"{router}/admin/policy", headers=headers)).json()
            assert "short" in str(policy) and "long" in str(policy)
            assert await _served(client, router, headers) == {"short": 0, "long": 0}
            short = {"model": "llama3-8b", "prompt": "hello there " * 20, "max_tokens": 4}
            for _ in range(3):
                resp = await client.post(f"{router}/v1/completions", json=short)
                assert resp.status_code == 200, resp.text
            assert await _served(client, router, headers) == {"short": 3, "long": 0}
            # The simulated engines count words: 3,000 of them is past the short pool's 2,048 tokens.
            long = {"model": "llama3-8b", "prompt": "document " * 3000, "max_tokens": 4}
            resp = await client.post(f"{router}/v1/completions", json=long)
            assert resp.status_code == 200, resp.text
            assert await _served(client, router, headers) == {"short": 3, "long": 1}
