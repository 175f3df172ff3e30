"""vLLM PD on the local target, end to end over simulated engines and the real router: two groups of one
prefill and one decode engine, each engine with its own NIXL side-channel port
(:mod:`infctl.local.engine_ports`), passed as vLLM's ``VLLM_NIXL_SIDE_CHANNEL_PORT``, which the simulated
engine reads as the real one does. Each prefill names its own port in its answer's ``kv_transfer_params``
(vLLM's default 5600 on every engine would collide), and requests through the router complete."""

from __future__ import annotations

from pathlib import Path

import httpx
from localkit import local_profile, supervised

from infctl.local import build_plan, port_is_free


async def test_each_local_prefill_names_its_own_side_channel_and_pd_requests_complete(tmp_path: Path) -> None:
    sim = {"profile": "llama3-8b-h100", "num_gpu_blocks": 512, "speedup": 20}
    profile = local_profile(
        tmp_path, "pdnixl", base_port=29000, model={"pd": {"kv_connector": "nixl"}, "sim": sim},
        mode="group", groups=2, group={"prefill": 1, "decode": 1},
        router={"enabled": True},
    )  # fmt: skip
    plan = build_plan(profile, is_free=port_is_free)
    engines = [s for s in plan.specs if s.kind == "engine"]
    prefills = [s for s in engines if s.role == "prefill"]
    side = [s.ports["nixl_side_channel"] for s in engines]
    assert len(prefills) == 2 and len(set(side)) == 4 and 5600 not in side
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    async with supervised(plan), httpx.AsyncClient(timeout=20, trust_env=False) as c:
        named = []
        for s in prefills:
            body = {"model": "m", "prompt": "hello " * 40, "max_tokens": 4, "kv_transfer_params": ask}
            r = await c.post(f"{s.url}/v1/completions", json=body)
            assert r.status_code == 200, r.text
            named.append(r.json()["kv_transfer_params"]["remote_port"])
        assert named == [s.ports["nixl_side_channel"] for s in prefills]
        router = plan.entrypoint.url
        usages = []
        for i in range(4):  # past the router's 512 uncached tokens, so each goes prefill then decode
            body = {"model": "m", "prompt": " ".join(f"q{i}w{j}" for j in range(700)), "max_tokens": 4}
            r = await c.post(f"{router}/v1/completions", json=body)
            assert r.status_code == 200, r.text
            usages.append(r.json()["usage"])
    # Each decode took its whole prompt as KV from a prefill (the modelled transfer, not a local prefill).
    assert all(u["prompt_tokens_details"]["cached_tokens"] == u["prompt_tokens"] for u in usages), usages
