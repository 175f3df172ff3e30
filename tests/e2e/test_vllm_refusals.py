"""What a real vLLM accepts and refuses, and ``infctl sim`` with it: the same edge cases sent to both must get
the same status and the same answer's shape (error type, param and code; choices and usage; content types).

The simulator serves the tiny model's name, tokenizer and context (4,096) so prompts count alike. The router
relays a 4xx and retries a 5xx elsewhere, and clients read ``error.type``/``param``: a simulator that serves
what vLLM refuses (or the reverse) hides exactly the bugs this suite is for.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import MODEL_NAME, Release

pytestmark = pytest.mark.slow
StartSim = Callable[..., Awaitable[Any]]

CMPL, CHAT = "/v1/completions", "/v1/chat/completions"
HI = [{"role": "user", "content": "hi"}]
LONG = " ".join(["hello"] * 4200)  # 12,600 tokens of the tiny model's, past the 4,096 context
JSON = {"content-type": "application/json"}


def ids(n: int) -> list[int]:
    return [300 + i % 50 for i in range(n)]


def cmpl(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL_NAME, "prompt": "hello world", "max_tokens": 3, "ignore_eos": True, **fields}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL_NAME, "messages": HI, "max_tokens": 3, "ignore_eos": True, **fields}


USAGE = {"include_usage": True}
# name -> (method, path, JSON body or raw bytes, headers)
CASES: dict[str, tuple[str, str, Any, dict[str, str]]] = {
    "completion": ("POST", CMPL, cmpl(), {}),
    "chat": ("POST", CHAT, chat(), {}),
    "no model named": ("POST", CMPL, {k: v for k, v in cmpl().items() if k != "model"}, {}),
    "empty model name": ("POST", CMPL, cmpl(model=""), {}),
    "unknown model": ("POST", CMPL, cmpl(model="gpt-nope"), {}),
    "unknown model, chat": ("POST", CHAT, chat(model="gpt-nope"), {}),
    "unknown model, stream": ("POST", CMPL, cmpl(model="gpt-nope", stream=True), {}),
    "prompt too long": ("POST", CMPL, cmpl(prompt=LONG), {}),
    "prompt too long, no max_tokens": ("POST", CMPL, {"model": MODEL_NAME, "prompt": LONG}, {}),
    "prompt too long, stream": ("POST", CMPL, cmpl(prompt=LONG, stream=True), {}),
    "chat too long": ("POST", CHAT, chat(messages=[{"role": "user", "content": LONG}]), {}),
    "prompt fills the context": ("POST", CMPL, cmpl(prompt=ids(4096), max_tokens=1), {}),
    "prompt + max_tokens over the context": ("POST", CMPL, cmpl(prompt=ids(4000), max_tokens=200), {}),
    "max_tokens = context": ("POST", CMPL, cmpl(prompt=ids(10), max_tokens=4096), {}),
    "max_tokens 0": ("POST", CMPL, cmpl(max_tokens=0), {}),
    "max_tokens -1": ("POST", CMPL, cmpl(max_tokens=-1), {}),
    "max_tokens over the context": ("POST", CMPL, cmpl(max_tokens=5000), {}),
    "chat max_tokens over the context": ("POST", CHAT, chat(max_tokens=5000), {}),
    "chat max_completion_tokens 0": ("POST", CHAT, chat(max_completion_tokens=0), {}),
    "max_tokens '3'": ("POST", CMPL, cmpl(max_tokens="3"), {}),
    "max_tokens 3.5": ("POST", CMPL, cmpl(max_tokens=3.5), {}),
    "missing prompt": ("POST", CMPL, {"model": MODEL_NAME, "max_tokens": 3}, {}),
    "empty prompt": ("POST", CMPL, cmpl(prompt=""), {}),
    "empty prompt list": ("POST", CMPL, cmpl(prompt=[]), {}),
    "prompt a number": ("POST", CMPL, cmpl(prompt=5), {}),
    "prompt token ids": ("POST", CMPL, cmpl(prompt=[1, 2, 3, 4]), {}),
    "negative token id": ("POST", CMPL, cmpl(prompt=[1, -2]), {}),
    "missing messages": ("POST", CHAT, {"model": MODEL_NAME, "max_tokens": 3}, {}),
    "empty messages": ("POST", CHAT, chat(messages=[]), {}),
    "messages a string": ("POST", CHAT, chat(messages="hi"), {}),
    "message without content": ("POST", CHAT, chat(messages=[{"role": "user"}]), {}),
    "n 0": ("POST", CMPL, cmpl(n=0), {}),
    "n 2": ("POST", CMPL, cmpl(n=2), {}),
    "chat n 2": ("POST", CHAT, chat(n=2), {}),
    "chat n 2, stream": ("POST", CHAT, chat(n=2, stream=True, stream_options=USAGE), {}),
    "batch of two prompts": ("POST", CMPL, cmpl(prompt=["hello", "world"]), {}),
    "batch of two id lists, n 2": ("POST", CMPL, cmpl(prompt=[[300, 301], [302, 303, 304]], n=2), {}),
    "stream with usage": ("POST", CMPL, cmpl(stream=True, stream_options=USAGE), {}),
    "chat stream with usage": ("POST", CHAT, chat(stream=True, stream_options=USAGE), {}),
    "stream_options without stream": ("POST", CMPL, cmpl(stream_options=USAGE), {}),
    "chat stream_options without stream": ("POST", CHAT, chat(stream_options=USAGE), {}),
    "logprobs 2": ("POST", CMPL, cmpl(logprobs=2), {}),
    "logprobs 100": ("POST", CMPL, cmpl(logprobs=100), {}),
    "top_logprobs without logprobs": ("POST", CHAT, chat(top_logprobs=2), {}),
    "temperature -1": ("POST", CMPL, cmpl(temperature=-1), {}),
    "top_p 0": ("POST", CMPL, cmpl(top_p=0), {}),
    "body a list": ("POST", CMPL, [1, 2], {}),
    "invalid JSON": ("POST", CMPL, b"{not json", JSON),
    "invalid JSON, chat": ("POST", CHAT, b"{not json", JSON),
    "empty body": ("POST", CMPL, b"", JSON),
    "text/plain": ("POST", CMPL, json.dumps(cmpl()).encode(), {"content-type": "text/plain"}),
    "no content-type": ("POST", CMPL, json.dumps(cmpl()).encode(), {}),
    "GET a POST route": ("GET", CMPL, None, {}),
    "POST a GET route": ("POST", "/v1/models", None, {}),
    "no such route": ("GET", "/v2/nothing", None, {}),
    "models": ("GET", "/v1/models", None, {}),
    "health": ("GET", "/health", None, {}),
    "metrics": ("GET", "/metrics", None, {}),
}

KNOWN = {
    "token id out of vocabulary": (
        ("POST", CMPL, cmpl(prompt=[1, 2, 99_999_999]), {}),
        "infctl's Tokenizer does not tell the simulator its vocabulary's size",
    ),
    "HEAD /health": (
        ("HEAD", "/health", None, {}),
        "aiohttp answers HEAD on every GET route; nothing sends it",
    ),
}
"""Disagreements left, with why: recorded (printed), not asserted."""


def send(client: httpx.Client, base: str, case: tuple[str, str, Any, dict[str, str]]) -> httpx.Response:
    method, path, body, headers = case
    if isinstance(body, bytes):
        return client.request(method, base + path, content=body, headers=headers)
    if body is None:
        return client.request(method, base + path, headers=headers)
    return client.request(method, base + path, json=body, headers=headers)


def shape(resp: httpx.Response) -> dict[str, Any]:
    """What must agree: status, media type, and the answer's shape (never its generated text or ids)."""
    media = resp.headers.get("content-type", "").split(";")[0]
    out: dict[str, Any] = {"status": resp.status_code, "media": media}
    if media == "text/event-stream":
        events = [e.removeprefix("data: ") for e in resp.text.strip().split("\n\n")]
        chunks = [json.loads(e) for e in events if e != "[DONE]"]
        usage = [c["usage"] for c in chunks if c.get("usage")]
        out["done"] = events[-1] == "[DONE]"
        out["objects"] = sorted({c.get("object") for c in chunks})
        out["choices"] = sorted({ch["index"] for c in chunks for ch in c["choices"]})
        out["finished"] = sorted(
            ch["index"] for c in chunks for ch in c["choices"] if ch.get("finish_reason")
        )
        details = ["cached_tokens" in u["prompt_tokens_details"] for u in usage]
        out["usage"] = [
            (u["prompt_tokens"], u["completion_tokens"], d) for u, d in zip(usage, details, strict=True)
        ]
        out["usage_chunk_choices"] = [c["choices"] for c in chunks if c.get("usage")]
    elif media == "application/json" and resp.content:
        body = resp.json()
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            err = body["error"]
            out["error"] = (sorted(err), err["type"], err["param"], err["code"])
        elif isinstance(body, dict) and "choices" in body:
            usage = body["usage"]
            out["object"] = body["object"]
            out["choices"] = [(c["index"], c["finish_reason"]) for c in body["choices"]]
            out["usage"] = (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"])
            out["cached_tokens"] = "cached_tokens" in usage["prompt_tokens_details"]
            out["logprobs"] = [c["logprobs"] is None for c in body["choices"]]
        elif isinstance(body, dict) and body.get("object") == "list":
            card = body["data"][0]
            out["card"] = (card["id"], card["object"], card["owned_by"], card["max_model_len"])
        else:
            out["body"] = body
    else:
        out["content-type"] = resp.headers.get("content-type")  # /metrics: the exposition format's version
        out["empty"] = resp.content == b""
    return out


def wait_healthy(url: str, limit_s: float = 420) -> None:
    """The engine answers /health (an earlier test may have killed one; the supervisor restarts it)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise AssertionError(f"{url} never became healthy")


async def test_simulator_accepts_and_refuses_what_vllm_does(
    vllm_release: Release, tiny_model: Path, start_sim: StartSim
) -> None:
    real_url = vllm_release.engine_urls[0]
    wait_healthy(real_url)
    sim = await start_sim(model=MODEL_NAME, tokenizer=str(tiny_model), max_model_len=4096)
    sim_url = sim.urls[0]
    wrong: list[str] = []

    # The simulator serves on this test's loop: the (sync) client runs in a thread.
    def run() -> None:
        with httpx.Client(timeout=300, trust_env=False) as client:
            for name, case in CASES.items():
                real, ours = shape(send(client, real_url, case)), shape(send(client, sim_url, case))
                if name == "logprobs 2":  # the simulator has no logprobs to give: it accepts, answers null
                    real.pop("logprobs", None), ours.pop("logprobs", None)
                if real != ours:
                    wrong.append(f"{name}:\n  vLLM {real}\n  sim  {ours}")
            for name, (case, why) in KNOWN.items():
                real, ours = shape(send(client, real_url, case)), shape(send(client, sim_url, case))
                same = "agree now" if real == ours else f"differ ({why})"
                print(f"\n{name}: {same}\n  vLLM {real}\n  sim  {ours}")

    await asyncio.to_thread(run)
    assert not wrong, "\n".join(wrong)
