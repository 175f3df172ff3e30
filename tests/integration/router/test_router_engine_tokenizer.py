"""``--tokenizer engine``: a router with no tokenizer files counts on its backends' own ``/tokenize``.

Two simulated vLLM engines tokenize with the tests' real BPE tokenizer; the router, given none, asks them:
its counts are theirs (its ``/tokenize``, and the prompt tokens it accounts for each request it routes).
With no engine answering, ``/tokenize`` is a clean 4xx naming the engines and the router stays up.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from tokenizerkit import chinese, english, tiny_tokenizer

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics
from infctl.tokenization import load_tokenizer

__all__ = ["tiny_tokenizer"]

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
rng = random.Random(5)
SYSTEM = chinese(rng, 300)


def prompt_tokens_counted(metrics: str) -> float:
    return sum(s.value for s in parse_metrics(metrics).get("infctl_router_prompt_tokens_total", []))


async def test_the_router_counts_as_its_engines_do(
    start_sim: StartSim, start_router: StartRouter, tiny_tokenizer: Path
) -> None:
    path = str(tiny_tokenizer)
    sims = [await start_sim(tokenizer=path) for _ in range(2)]
    url = await start_router([Backend(id=s.urls[0], url=s.urls[0]) for s in sims], tokenizer="engine")
    own = load_tokenizer(path)
    requests: list[tuple[str, dict[str, Any]]] = [
        ("/v1/completions", {"prompt": english(rng, 60)}),
        ("/v1/completions", {"prompt": chinese(rng, 250)}),
        ("/v1/chat/completions", {"messages": [{"role": "system", "content": SYSTEM},
                                               {"role": "user", "content": "第一个问题"}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": english(rng, 20)}],
                                  "add_generation_prompt": False}),
    ]  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as c:
        for path_, body in requests:
            chat = "messages" in body
            expected = (
                len(
                    own.chat_ids(
                        body["messages"], add_generation_prompt=body.get("add_generation_prompt", True)
                    )
                )
                if chat
                else own.count(body["prompt"])
            )
            counted = await c.post(f"{url}/tokenize", json={"model": MODEL, **body})
            assert counted.status_code == 200, counted.text
            assert counted.json() == {
                "count": expected,
                "tokenizer": "engine:the router's backends",
                "exact": True,
            }
            before = prompt_tokens_counted((await c.get(f"{url}/metrics")).text)
            resp = await c.post(f"{url}{path_}", json={"model": MODEL, "max_tokens": 2, **body})
            assert resp.status_code == 200, resp.text
            assert resp.json()["usage"]["prompt_tokens"] == expected
            for _ in range(200):  # routed on the estimate, then counted exactly in a worker thread
                counted_now = prompt_tokens_counted((await c.get(f"{url}/metrics")).text) - before
                if counted_now == expected:
                    break
                await asyncio.sleep(0.02)
            assert counted_now == expected


async def test_no_engine_answering_is_a_clean_refusal(start_router: StartRouter) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    url = await start_router([Backend(id=dead, url=dead)], tokenizer="engine")
    async with httpx.AsyncClient(timeout=30) as c:
        resp = await c.post(f"{url}/tokenize", json={"model": MODEL, "prompt": "hello"})
        assert resp.status_code == 503, resp.text  # the router's fault, not the prompt's: retry later
        assert resp.json()["error"]["type"] == "ServiceUnavailableError"
        assert "no engine" in resp.text
        assert (await c.get(f"{url}/health")).status_code == 200
