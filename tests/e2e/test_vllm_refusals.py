"""What a real vLLM accepts and refuses, and ``infctl sim`` with it: the same edge cases sent to both must get
the same status and the same answer's shape (error type, param and code; choices and usage; content types).

The simulator serves the tiny model's name, tokenizer and context (4,096) so prompts count alike. The router
relays a 4xx and retries a 5xx elsewhere, and clients read ``error.type``/``param``: a simulator that serves
what vLLM refuses (or the reverse) hides exactly the bugs this suite is for.
"""

from __future__ import annotations

import asyncio
import json
import random
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
    "token id out of vocabulary": ("POST", CMPL, cmpl(prompt=[1, 2, 99_999_999]), {}),
    "token id = vocab_size": ("POST", CMPL, cmpl(prompt=[1, 2, 4096]), {}),  # the tiny model's 4,096
    "largest token id": ("POST", CMPL, cmpl(prompt=[1, 2, 4095]), {}),
    "token id out of vocabulary, stream": ("POST", CMPL, cmpl(prompt=[4096], stream=True), {}),
    "token id out of vocabulary in a batch": ("POST", CMPL, cmpl(prompt=[[1, 2], [3, 5000]], n=2), {}),
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
    "version": ("GET", "/version", None, {}),
    "metrics": ("GET", "/metrics", None, {}),
    # FastAPI's GET routes do not answer HEAD (405, Allow: GET); /metrics is prometheus_client's app, mounted:
    # it answers every method (0.0.4 text format but on GET, which the instrumentator's route answers).
    "HEAD /health": ("HEAD", "/health", None, {}),
    "HEAD /v1/models": ("HEAD", "/v1/models", None, {}),
    "HEAD /load": ("HEAD", "/load", None, {}),
    "HEAD /ping": ("HEAD", "/ping", None, {}),
    "PUT /ping": ("PUT", "/ping", None, {}),
    "HEAD /metrics": ("HEAD", "/metrics", None, {}),
    "POST /metrics": ("POST", "/metrics", None, {}),
    "HEAD /nothing": ("HEAD", "/nothing", None, {}),
    # Started without --enable-request-id-headers: no answer carries x-request-id, the client's included.
    "completion with x-request-id": ("POST", CMPL, cmpl(), {"x-request-id": "r-1"}),
    "stream with x-request-id": ("POST", CMPL, cmpl(stream=True), {"x-request-id": "r-2"}),
    "refusal with x-request-id": ("POST", CMPL, cmpl(max_tokens=0), {"x-request-id": "r-3"}),
    "health with x-request-id": ("GET", "/health", None, {"x-request-id": "r-4"}),
}

KNOWN: dict[str, tuple[tuple[str, str, Any, dict[str, str]], str]] = {}
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
    out: dict[str, Any] = {"status": resp.status_code, "media": media, "allow": resp.headers.get("allow")}
    out["x-request-id"] = resp.headers.get_list("x-request-id")
    if media == "text/event-stream":
        events = [e.removeprefix("data: ") for e in resp.text.strip().split("\n\n")]
        chunks = [json.loads(e) for e in events if e != "[DONE]"]
        errors = [c["error"] for c in chunks if isinstance(c.get("error"), dict)]
        out["errors"] = [(sorted(e), e["type"], e["param"], e["code"]) for e in errors]
        chunks = [c for c in chunks if "error" not in c]
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


COUNTED = (
    "vllm:prompt_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "vllm:request_prompt_tokens_count",
    "vllm:request_prompt_tokens_sum",
)
"""What one request adds to an engine's counters (summed over labels: one engine core, no data parallel)."""


def counters(client: httpx.Client, base: str) -> dict[str, float]:
    out = dict.fromkeys(COUNTED, 0.0)
    for line in client.get(base + "/metrics").text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in out:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def usage_of(resp: httpx.Response) -> tuple[int, int, int]:
    """(prompt, completion, cached) tokens of an answer, or of a stream's usage chunk."""
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        events = [e.removeprefix("data: ") for e in resp.text.strip().split("\n\n")]
        usage = [json.loads(e)["usage"] for e in events if e != "[DONE]" and json.loads(e).get("usage")][-1]
    else:
        usage = resp.json()["usage"]
    return usage["prompt_tokens"], usage["completion_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


def sequences(seed: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Requests for several sequences, on prompts neither engine has seen (random ids and words)."""
    rng = random.Random(seed)

    def fresh(n: int) -> list[int]:
        return [rng.randrange(10, 4000) for _ in range(n)]

    def words(n: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": " ".join(f"w{rng.randrange(10**6)}" for _ in range(n))}]

    shared, twice = fresh(300), fresh(300)
    return {
        "n 3, 10 ids": (CMPL, cmpl(prompt=fresh(10), n=3)),
        "n 3, 300 ids": (CMPL, cmpl(prompt=shared, n=3)),
        "n 3, the same 300 ids again": (CMPL, cmpl(prompt=shared, n=3)),
        "n 3, 300 ids, stream": (CMPL, cmpl(prompt=fresh(300), n=3, stream=True, stream_options=USAGE)),
        "chat n 3": (CHAT, chat(messages=words(150), n=3)),
        "chat n 3, stream": (CHAT, chat(messages=words(150), n=3, stream=True, stream_options=USAGE)),
        "batch of two 300-id prompts, n 2": (CMPL, cmpl(prompt=[fresh(300), fresh(300)], n=2)),
        "batch of one prompt twice": (CMPL, cmpl(prompt=[twice, twice])),
    }


async def test_several_sequences_count_and_cache_as_vllm_does(
    vllm_release: Release, tiny_model: Path, start_sim: StartSim
) -> None:
    """``n`` > 1 and batches, counted by the simulator as by vLLM: its prompt-token, prefix-cache and request
    counters (vLLM's engine core counts every sequence, and the later ones hit the blocks the first
    schedules in the same step) and the answer's usage (each prompt once; one sequence's cached tokens)."""
    real_url = vllm_release.engine_urls[0]
    wait_healthy(real_url)
    # The CPU build's KV block is 128 tokens: the simulator's too, so hits agree to the token.
    sim = await start_sim(model=MODEL_NAME, tokenizer=str(tiny_model), max_model_len=4096, block_size=128)
    cases = sequences(time.time_ns())
    wrong: list[str] = []

    def measure(client: httpx.Client, base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        before = counters(client, base)
        resp = client.post(base + path, json=body)
        assert resp.status_code == 200, resp.text
        after = counters(client, base)
        return {"usage": usage_of(resp), **{k: after[k] - before[k] for k in COUNTED}}

    def run() -> None:
        with httpx.Client(timeout=300, trust_env=False) as client:
            for name, (path, body) in cases.items():
                real, ours = measure(client, real_url, path, body), measure(client, sim.urls[0], path, body)
                print(f"\n{name}:\n  vLLM {real}\n  sim  {ours}")
                if real != ours:
                    wrong.append(f"{name}:\n  vLLM {real}\n  sim  {ours}")

    await asyncio.to_thread(run)
    assert not wrong, "\n".join(wrong)
