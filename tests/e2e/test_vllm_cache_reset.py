"""vLLM 0.32's prefix-cache reset, on the real engine, as ``infctl.engines.vllm.CACHE_RESET`` reads it and the
simulator imitates it: ``/reset_prefix_cache`` (and ``/is_sleeping``) only with ``VLLM_SERVER_DEV_MODE=1``,
404 without; in dev mode ``{"success": true}`` and an empty prefix cache after it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import MODEL_NAME, Release, deployed, engine_command, hanzi, tiny_vllm_model

from infctl import tokens
from infctl.bench.cache_reset import reset_prefix_caches
from infctl.engines import vllm as v
from infctl.errors import EngineError

pytestmark = pytest.mark.slow
StartSim = Callable[..., Awaitable[Any]]


@pytest.fixture(scope="module")
def dev_release(vllm_python: str, tiny_model: Path) -> Iterator[Release]:
    """One real vLLM engine started in dev mode, no router."""
    model = tiny_vllm_model(tiny_model)
    model["env"] = {**model["env"], v.DEV_MODE_ENV: "1"}
    profile = {
        "name": "e2e-vllm-dev",
        "target": "local",
        "mode": "aggregated",
        "replicas": 1,
        "model": model,
        "router": {"enabled": False},
        "local": {"simulate": False, "engine_command": engine_command(vllm_python, model)},
    }
    with deployed(profile) as release:
        yield release


async def _cached(client: httpx.AsyncClient, url: str, prompt: str) -> int:
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1}
    resp = await client.post(f"{url}/v1/completions", json=body)
    assert resp.status_code == 200, resp.text
    return int((resp.json()["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


async def test_in_dev_mode_the_reset_empties_the_cache(dev_release: Release, start_sim: StartSim) -> None:
    sim = (await start_sim(model=MODEL_NAME, server_dev_mode=True)).urls[0]
    # Several of the CPU build's 128-token blocks for vLLM; the simulator's words for the simulator.
    prompts = {dev_release.engine_urls[0]: hanzi(600, seed=5), sim: tokens.synth_words(64, salt=5)}
    async with httpx.AsyncClient(trust_env=False, timeout=120) as client:
        for url, prompt in prompts.items():
            await _cached(client, url, prompt)
            assert await _cached(client, url, prompt) > 0, url
            await reset_prefix_caches(client, {url: v.ADAPTER})
            assert await _cached(client, url, prompt) == 0, url
        answers = [
            [(r.status_code, r.json()) for r in (await client.post(f"{u}/reset_prefix_cache"),
                                                 await client.get(f"{u}/is_sleeping"))]
            for u in prompts
        ]  # fmt: skip
    real, simulated = answers
    assert real == [(200, {"success": True}), (200, {"is_sleeping": False})]
    assert simulated == real


async def test_outside_dev_mode_the_bench_says_how_to_start_vllm(
    vllm_release: Release, start_sim: StartSim
) -> None:
    sim = (await start_sim(model=MODEL_NAME)).urls[0]
    async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
        statuses = [
            ((await client.post(f"{u}/reset_prefix_cache")).status_code,
             (await client.get(f"{u}/is_sleeping")).status_code)
            for u in (vllm_release.engine_urls[0], sim)
        ]  # fmt: skip
        with pytest.raises(EngineError) as err:
            await reset_prefix_caches(client, dict.fromkeys(vllm_release.engine_urls, v.ADAPTER))
    assert statuses == [(404, 404), (404, 404)]
    assert err.value.hint is not None and f"{v.DEV_MODE_ENV}=1" in err.value.hint
