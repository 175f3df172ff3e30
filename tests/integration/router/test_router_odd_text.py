"""Prompts JSON allows but UTF-8 does not: a lone surrogate (``"\\ud800"``) is valid JSON text."""

from __future__ import annotations

import httpx
import pytest

from infctl.router.snapshot import Backend

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LONE = b'"word \\ud800 and \\udfff more words ' + b"pad " * 40 + b'"'


@pytest.mark.parametrize("policy", ["cache_aware", "session", "round_robin"])
async def test_a_lone_surrogate_in_the_prompt_is_routed(start_sim, start_router, policy: str) -> None:
    sim = await start_sim(instances=2)
    url = await start_router([Backend(id=u, url=u) for u in sim.urls], policy=policy)
    chat = b'{"model": "%s", "max_tokens": 4, "messages": [{"role": "user", "content": %s}]}' % (
        MODEL.encode(),
        LONE,
    )
    plain = b'{"model": "%s", "max_tokens": 4, "prompt": %s}' % (MODEL.encode(), LONE)
    headers = {"content-type": "application/json", "x-session-id": "\\ud800"}
    async with httpx.AsyncClient(timeout=10) as c:
        for path, body in (("/v1/chat/completions", chat), ("/v1/completions", plain)):
            r = await c.post(url + path, content=body, headers=headers)
            assert r.status_code == 200, r.text
