"""Length decisions on real token counts: a Chinese prompt of 3,000 characters is ~3,000 tokens, not one
whitespace "word", so it reaches the long pool whether the router has the estimate or a real tokenizer."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tokenizerkit import english, tiny_tokenizer

from infctl.router.snapshot import Backend
from infctl.tokenization import EstimateTokenizer, load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]
Scrape = Callable[[str], Awaitable[dict[str, float]]]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
POLICY = {
    "preset": "least_load",
    "buckets": [
        {"name": "short", "max_tokens": 512, "pools": ["short"], "spill_to": []},
        {"name": "long", "pools": ["long"]},
    ],
}
CHINESE = "大型语言模型的推理服务需要在延迟和吞吐之间取得平衡，长请求与短请求应当分开处理。"  # noqa: RUF001
"""40 characters of Chinese prose, no spaces."""


def served(samples: dict[str, float]) -> float:
    return sum(v for k, v in samples.items() if k.startswith("vllm:request_success_total"))


async def two_pools(start_sim: StartSim, start_router: StartRouter, tokenizer: str) -> tuple[str, str, str]:
    """(router URL, short engine, long engine): a router with POLICY's buckets over one engine per pool."""
    sim = await start_sim(instances=2)
    short_url, long_url = sim.urls
    url = await start_router(
        [Backend(id=short_url, url=short_url, pool="short"), Backend(id=long_url, url=long_url, pool="long")],
        policy=POLICY,
        tokenizer=tokenizer,
    )
    return url, short_url, long_url


@pytest.mark.parametrize("tokenizer", ["auto", "estimate"])
async def test_a_long_chinese_prompt_reaches_the_long_pool(
    start_sim: StartSim, start_router: StartRouter, scrape: Scrape, tokenizer: str
) -> None:
    url, short_url, long_url = await two_pools(start_sim, start_router, tokenizer)
    long_prompt = (CHINESE * 75)[:3000]
    assert " " not in long_prompt  # one "word": the old convention counted it as 1 token
    async with httpx.AsyncClient(timeout=60) as c:
        chat = {"model": MODEL, "messages": [{"role": "user", "content": long_prompt}], "max_tokens": 2}
        assert (await c.post(f"{url}/v1/chat/completions", json=chat)).status_code == 200
        assert (served(await scrape(long_url)), served(await scrape(short_url))) == (1, 0)
        short = {"model": MODEL, "messages": [{"role": "user", "content": CHINESE}], "max_tokens": 2}
        assert (await c.post(f"{url}/v1/chat/completions", json=short)).status_code == 200
        completion = {"model": MODEL, "prompt": long_prompt, "max_tokens": 2}
        assert (await c.post(f"{url}/v1/completions", json=completion)).status_code == 200
        metrics = (await c.get(f"{url}/metrics")).text
    assert (served(await scrape(long_url)), served(await scrape(short_url))) == (2, 1)
    counted = [x for x in metrics.splitlines() if x.startswith("infctl_router_prompt_tokens_total")]
    assert counted and float(counted[0].rpartition(" ")[2]) >= 2 * 3000 + 40


async def test_with_the_models_tokenizer_only_a_prompt_near_a_bound_waits_for_it(
    start_sim: StartSim, start_router: StartRouter, scrape: Scrape, tiny_tokenizer: Path
) -> None:
    url, short_url, long_url = await two_pools(start_sim, start_router, str(tiny_tokenizer))
    model, estimate = load_tokenizer(str(tiny_tokenizer)), EstimateTokenizer()
    rng = random.Random(5)
    near = english(rng, 100)  # the estimate says short (<= 512), the model long
    while model.count(near) <= 512:
        near += " " + english(rng, 5)
    assert estimate.count(near) <= 512
    far = (CHINESE * 75)[:3000]  # long by any count: routed on the estimate, counted after
    async with httpx.AsyncClient(timeout=60) as c:
        for prompt in (near, far):
            body = {"model": MODEL, "prompt": prompt, "max_tokens": 2}
            assert (await c.post(f"{url}/v1/completions", json=body)).status_code == 200
        metrics = ""
        for _ in range(100):  # the background count lands a moment after the answer
            metrics = (await c.get(f"{url}/metrics")).text
            if 'exact_token_counts_total{when="background"} 1' in metrics:
                break
    assert (served(await scrape(long_url)), served(await scrape(short_url))) == (2, 0)
    assert 'infctl_router_exact_token_counts_total{when="routing"} 1' in metrics
    assert 'infctl_router_exact_token_counts_total{when="background"} 1' in metrics
    assert "infctl_router_estimate_misses_total 0" in metrics
    counted = [x for x in metrics.splitlines() if x.startswith("infctl_router_prompt_tokens_total")]
    assert float(counted[0].rpartition(" ")[2]) == model.count(near) + model.count(far)  # exact, both


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": [{"content": "no role"}]},
        {"messages": "not a list"},
        {"messages": [{"role": "user", "content": [{"type": "image_url"}, "not a part"]}]},
        {"prompt": {"not": "text"}},
        {"prompt": [[1, 2], "a"]},  # a batch of token-id lists is served (vLLM 0.32); a mix is not
    ],
)
async def test_malformed_prompts_get_a_400_and_the_router_stays_healthy(
    sim_url: str, start_router: StartRouter, body: dict[str, Any]
) -> None:
    url = await start_router([Backend(id=sim_url, url=sim_url)], tokenizer="estimate")
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    async with httpx.AsyncClient(timeout=30) as c:
        resp = await c.post(f"{url}{path}", json={"model": MODEL, **body})
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["type"] == "BadRequestError"
        ok = {"model": MODEL, "messages": [{"role": "user", "content": "你好"}], "max_tokens": 1}
        assert (await c.post(f"{url}/v1/chat/completions", json=ok)).status_code == 200


async def test_content_parts_and_lone_surrogates_are_counted_not_refused(
    sim_url: str, start_router: StartRouter
) -> None:
    url = await start_router([Backend(id=sim_url, url=sim_url)], tokenizer="estimate")
    parts = [
        {"type": "text", "text": "描述这张图片"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    raw = b'{"model": "%s", "prompt": "abc \\ud800 def", "max_tokens": 1}' % MODEL.encode()
    async with httpx.AsyncClient(timeout=30) as c:
        msg = {"model": MODEL, "messages": [{"role": "user", "content": parts}], "max_tokens": 1}
        assert (await c.post(f"{url}/v1/chat/completions", json=msg)).status_code == 200
        resp = await c.post(
            f"{url}/v1/completions", content=raw, headers={"content-type": "application/json"}
        )
        assert resp.status_code == 200, resp.text
        bad = await c.post(f"{url}/v1/completions", content=b'{"prompt": "\xff\xfe"}')
        assert bad.status_code == 400
        # Past the tokenizer's off_loop_chars the prompt is tokenized in a worker thread: same answer.
        big = {"model": MODEL, "prompt": "测试 " * 20_000, "max_tokens": 1}
        assert (await c.post(f"{url}/v1/completions", json=big)).status_code == 200


async def test_tokenize_answers_the_routers_count_in_vllms_shape(
    sim_url: str, start_router: StartRouter
) -> None:
    url = await start_router([Backend(id=sim_url, url=sim_url)], tokenizer="estimate")
    async with httpx.AsyncClient(timeout=30) as c:
        chat = await c.post(
            f"{url}/tokenize", json={"model": MODEL, "messages": [{"role": "user", "content": "你好世界"}]}
        )
        text = await c.post(f"{url}/tokenize", json={"model": MODEL, "prompt": "abcdefgh"})
        bad = await c.post(f"{url}/tokenize", json={"model": MODEL, "messages": []})
    assert chat.status_code == 200 and chat.json()["tokenizer"] == "estimate" and not chat.json()["exact"]
    assert chat.json()["count"] >= 4  # four hanzi, at least a token each
    assert text.json()["count"] == 2  # 8 ASCII bytes
    assert bad.status_code == 400


async def test_the_exact_count_after_routing_waits_until_the_answer_is_out(
    start_router: StartRouter, tiny_tokenizer: Path
) -> None:
    """A count overlapping its own request's first token delayed it: it starts once the answer is sent."""
    from aiohttp import web

    gate, arrived = asyncio.Event(), asyncio.Event()

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        arrived.set()
        await gate.wait()
        choice = {"index": 0, "text": " a", "finish_reason": "length"}
        return web.json_response({"id": "x", "choices": [choice]})

    async def ok(_: web.Request) -> web.Response:
        return web.json_response({})

    async def background(c: httpx.AsyncClient, url: str) -> float:
        """Counts after routing so far (the series appears with its first)."""
        for line in (await c.get(f"{url}/metrics")).text.splitlines():
            if line.startswith('infctl_router_exact_token_counts_total{when="background"}'):
                return float(line.rpartition(" ")[2])
        return 0.0

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    app.router.add_get("/{tail:.*}", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    engine = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        url = await start_router([Backend(id="e", url=engine)], tokenizer=str(tiny_tokenizer))
        async with httpx.AsyncClient(timeout=30) as c:
            body = {"model": MODEL, "prompt": english(random.Random(3), 300), "max_tokens": 1}
            sent = asyncio.create_task(c.post(f"{url}/v1/completions", json=body))
            await asyncio.wait_for(arrived.wait(), 10)
            during = [await background(c, url)]
            for _ in range(10):  # the old code counted here, two loop turns after dispatch (~1 ms)
                await asyncio.sleep(0.02)
                during.append(await background(c, url))
            gate.set()
            assert (await sent).status_code == 200
            after = 0.0
            for _ in range(200):
                after = await background(c, url)
                if after == 1:
                    break
                await asyncio.sleep(0.01)
    finally:
        gate.set()
        await runner.cleanup()
    assert set(during) == {0} and after == 1
