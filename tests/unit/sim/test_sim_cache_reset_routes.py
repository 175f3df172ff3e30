"""The simulator's prefix-cache resets, as the real engines serve them: vLLM 0.32's ``/reset_prefix_cache``
and ``/is_sleeping`` only in dev mode (``VLLM_SERVER_DEV_MODE=1``; 404 otherwise), answering
``{"success": false}`` while requests hold blocks; SGLang's ``/flush_cache`` always, 400 while busy."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from infctl import tokens
from infctl.engines.sglang import FLUSH_CACHE_ANSWER

PROMPT = tokens.synth_words(64, salt=7)


async def _cached(client: httpx.AsyncClient, url: str, rank: int | None) -> int:
    """Prompt tokens served from the prefix cache for PROMPT, on data-parallel rank ``rank``."""
    headers = {} if rank is None else {"x-data-parallel-rank": str(rank)}
    body = {"prompt": PROMPT, "max_tokens": 1}
    resp = await client.post(f"{url}/v1/completions", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return int(resp.json()["usage"]["prompt_tokens_details"]["cached_tokens"])


async def _hold_blocks(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """A streamed request that is still generating when this returns (the caller closes it)."""
    body = {"prompt": PROMPT, "max_tokens": 2000, "stream": True}
    resp = await client.send(client.build_request("POST", f"{url}/v1/completions", json=body), stream=True)
    async for line in resp.aiter_lines():
        if line.startswith("data:") and json.loads(line[5:])["choices"][0]["text"]:
            return resp
    raise AssertionError("the stream ended before its first token")


@pytest.mark.parametrize("dp", [1, 2])
async def test_vllm_serves_no_dev_endpoint_outside_dev_mode(start_sim: Any, dp: int) -> None:
    url = (await start_sim(data_parallel_size=dp)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        reset = await client.post(f"{url}/reset_prefix_cache")
        sleeping = await client.get(f"{url}/is_sleeping")
        assert await _cached(client, url, None) == 0
        assert await _cached(client, url, None) > 0  # and the cache stays warm
    assert (reset.status_code, sleeping.status_code) == (404, 404)


@pytest.mark.parametrize("dp", [1, 2])
async def test_vllm_dev_mode_resets_every_rank(start_sim: Any, dp: int) -> None:
    url = (await start_sim(data_parallel_size=dp, server_dev_mode=True)).urls[0]
    ranks = [None] if dp == 1 else list(range(dp))
    async with httpx.AsyncClient(timeout=30) as client:
        for rank in ranks:
            await _cached(client, url, rank)
            assert await _cached(client, url, rank) > 0
        reset = await client.post(f"{url}/reset_prefix_cache")
        assert (reset.status_code, reset.json()) == (200, {"success": True})
        assert [await _cached(client, url, rank) for rank in ranks] == [0] * len(ranks)
        sleeping = await client.get(f"{url}/is_sleeping")
    assert (sleeping.status_code, sleeping.json()) == (200, {"is_sleeping": False})


async def test_vllm_reset_answers_false_while_a_request_runs(start_sim: Any) -> None:
    url = (await start_sim(server_dev_mode=True, time_scale=1.0)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        running = await _hold_blocks(client, url)
        busy = await client.post(f"{url}/reset_prefix_cache")
        await running.aclose()
    assert (busy.status_code, busy.json()) == (200, {"success": False})


async def test_sglang_flushes_on_get_or_post_and_refuses_while_busy(start_sim: Any) -> None:
    url = (await start_sim(personality="sglang", time_scale=1.0)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        await _cached(client, url, None)
        flushed = [await client.post(f"{url}/flush_cache"), await client.get(f"{url}/flush_cache")]
        assert await _cached(client, url, None) == 0
        running = await _hold_blocks(client, url)
        busy = await client.post(f"{url}/flush_cache")
        await running.aclose()
    assert [(r.status_code, r.text) for r in flushed] == [(200, FLUSH_CACHE_ANSWER)] * 2
    assert (busy.status_code, busy.text) == (400, FLUSH_CACHE_ANSWER)


async def test_sglang_flush_reaches_every_rank(start_sim: Any) -> None:
    url = (await start_sim(personality="sglang", data_parallel_size=2)).urls[0]

    async def cached(rank: int) -> int:
        body = {"prompt": PROMPT, "max_tokens": 1, "data_parallel_rank": rank}
        resp = await client.post(f"{url}/v1/completions", json=body)
        assert resp.status_code == 200, resp.text
        return int(resp.json()["usage"]["prompt_tokens_details"]["cached_tokens"])

    async with httpx.AsyncClient(timeout=30) as client:
        warm = [(await cached(rank), await cached(rank))[1] for rank in (0, 1)]
        flushed = await client.post(f"{url}/flush_cache")
        cold = [await cached(rank) for rank in (0, 1)]
    assert all(warm) and flushed.status_code == 200 and cold == [0, 0]
