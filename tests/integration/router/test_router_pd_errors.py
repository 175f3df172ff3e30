"""PD error handling against simulated engines: a failing prefill leg is blamed on the prefill backend
and retried (SGLang's parallel leg cancels its decode leg): a vLLM decode then prefills the request itself, an
SGLang decode never serves one alone, so with no other prefill or aggregated engine the client gets a 502;
a prefill 4xx reaches the client as such."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from aiohttp import web

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LONG_PROMPT = " ".join(f"w{i}" for i in range(1000))


def pair(prefill: str, decode: str) -> list[Backend]:
    return [
        Backend(id="p", url=prefill, role="prefill", group="g0"),
        Backend(id="d", url=decode, role="decode", group="g0"),
    ]


async def backends(c: httpx.AsyncClient, url: str) -> dict[str, dict[str, Any]]:
    return {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}


async def test_a_failing_prefill_is_blamed_and_the_request_prefilled_locally(start_sim, start_router) -> None:
    # Should a decode wait for KV that never comes, it waits past the client's timeout: only a router that
    # judges the prefill leg itself answers in time.
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"), pd_wait_timeout=600)
    prefill, decode = sim.urls
    url = await start_router(pair(prefill, decode), engine="vllm", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=20) as c:
        r = await c.post(f"{prefill}/admin/faults", json={"specs": ["error-rate=1.0:503"]})
        assert r.status_code == 200
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
        answer = await c.post(f"{url}/v1/completions", json=body)
        listed = await backends(c, url)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == 4
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (1, 0)
    assert "503" in str(listed["p"]["last_error"]) and listed["d"]["last_error"] is None
    assert value(metrics, "infctl_router_retries_total") == 1
    decisions = {s.labels["reason"]: s.value for s in metrics["infctl_router_decisions_total"]}
    assert decisions == {"disaggregated": 1, "no_prefill_backend": 1}


async def test_a_failing_sglang_prefill_never_leaves_its_decode_alone(start_sim, start_router) -> None:
    # With no other prefill and no aggregated engine (test_router_pd_decode_alone: one takes over), the
    # request fails rather than reach a decode engine that would refuse it.
    sim = await start_sim(personality="sglang", instances=2, roles=("prefill", "decode"), pd_wait_timeout=600)
    url = await start_router(pair(*sim.urls), engine="sglang", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=20) as c:
        assert (
            await c.post(f"{sim.urls[0]}/admin/faults", json={"specs": ["error-rate=1.0:503"]})
        ).is_success
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
        answer = await c.post(f"{url}/v1/completions", json=body)
        listed = await backends(c, url)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert answer.status_code == 502
    assert "all attempts failed; last: p:" in answer.json()["error"]["message"]
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (1, 0)
    decisions = {s.labels["reason"]: s.value for s in metrics["infctl_router_decisions_total"]}
    assert decisions == {"disaggregated": 1}  # no second decision: nothing could take it


@pytest.mark.parametrize("personality", ["sglang", "vllm"])
@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_prefill_4xx_reaches_the_client_in_the_openai_shape(
    start_sim, start_router, personality: str, client: str
) -> None:
    sim = await start_sim(
        personality=personality, instances=2, roles=("prefill", "decode"), pd_wait_timeout=600
    )
    prefill, decode = sim.urls
    url = await start_router(
        pair(prefill, decode), engine=personality, pd_min_uncached_tokens=16, upstream_client=client
    )
    async with httpx.AsyncClient(timeout=20) as c:
        await c.post(f"{prefill}/admin/faults", json={"specs": ["error-rate=1.0:422"]})
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
        answer = await c.post(f"{url}/v1/completions", json=body, headers={"x-request-id": "r-422"})
        listed = await backends(c, url)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == 422 and "Injected fault" in error["message"]
    assert answer.headers["x-request-id"] == "r-422"
    assert listed["p"]["failed"] == listed["d"]["failed"] == 0  # the client's mistake: nobody blamed
    assert value(metrics, "infctl_router_retries_total") == 0


async def test_vllm_unknown_model_passes_through(start_sim, start_router) -> None:
    sim = await start_sim(instances=2, roles=("prefill", "decode"))
    url = await start_router(pair(*sim.urls), pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=20) as c:
        answer = await c.post(f"{url}/v1/completions", json={"model": "nope", "prompt": LONG_PROMPT})
        listed = await backends(c, url)
    assert answer.status_code == 404
    assert "nope" in answer.json()["error"]["message"]
    assert listed["p"]["failed"] == listed["d"]["failed"] == 0


async def test_a_vllm_prefill_answer_without_kv_transfer_params_is_a_prefill_failure(
    start_sim, start_router
) -> None:
    async def completions(_: web.Request) -> web.Response:
        return web.json_response({"id": "x", "choices": [{"text": "a"}]})  # a prefill with no KV connector

    async def ok(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/{tail:.*}", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        decode = (await start_sim(roles=("decode",))).urls[0]
        url = await start_router(pair(f"http://127.0.0.1:{port}", decode), pd_min_uncached_tokens=16)
        async with httpx.AsyncClient(timeout=20) as c:
            answer = await c.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": LONG_PROMPT})
            listed = await backends(c, url)
    finally:
        await runner.cleanup()
    assert answer.status_code == 200, answer.text
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (1, 0)
    assert "kv_transfer_params" in str(listed["p"]["last_error"])


async def dead_prefill_params(start_sim: Any) -> tuple[dict[str, Any], str]:
    """kv_transfer_params from a sim prefill that then crashed, and a decode of the same process (whose
    handshake finds nothing behind them)."""
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.urls
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    async with httpx.AsyncClient(timeout=20) as c:
        leg = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 1, "kv_transfer_params": ask}
        params = (await c.post(f"{prefill}/v1/completions", json=leg)).json()["kv_transfer_params"]
        await c.post(f"{prefill}/admin/faults", json={"specs": ["crash-after=0"]})
    return params, decode


async def answering_prefill(params: dict[str, Any]) -> tuple[web.AppRunner, str]:
    """A prefill engine that answers every leg with ``params`` (a live engine's, or a dead one's)."""

    async def completions(_: web.Request) -> web.Response:
        return web.json_response({"id": "x", "choices": [{"text": "a"}], "kv_transfer_params": params})

    async def ok(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/{tail:.*}", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def test_a_decode_that_cannot_load_the_kv_prefills_for_itself_and_the_prefill_is_blamed(
    start_sim, start_router
) -> None:
    # The window the e2e test hit on real vLLM: the prefill answered, then died before its decode pulled the
    # KV; vLLM's decode answers 500. Blaming the decode and moving on left a one-decode fleet with nothing.
    params, decode = await dead_prefill_params(start_sim)
    runner, prefill = await answering_prefill(params)
    try:
        url = await start_router(pair(prefill, decode), engine="vllm", pd_min_uncached_tokens=16)
        async with httpx.AsyncClient(timeout=20) as c:
            body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
            answer = await c.post(f"{url}/v1/completions", json=body)
            listed = await backends(c, url)
            metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    finally:
        await runner.cleanup()
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == 4
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (1, 0)
    assert "could not load its KV" in str(listed["p"]["last_error"])
    decisions = {s.labels["reason"]: s.value for s in metrics["infctl_router_decisions_total"]}
    assert decisions == {"disaggregated": 1, "no_prefill_backend": 1}
    failures = {(s.labels["prefill"], s.labels["decode"]): s.value
                for s in metrics["infctl_router_pd_transfer_failures_total"]}  # fmt: skip
    assert failures == {("p", "d"): 1}


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "chat"])
@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_stream_whose_decode_cannot_load_the_kv_is_retried_not_relayed(
    start_sim, start_router, chat: bool, client: str
) -> None:
    # vLLM 0.32 answers such a stream 200, then (a chat: after its role chunk) the error event and [DONE]:
    # nothing the client could use, so the router retries it as it does the non-streamed 500.
    params, decode = await dead_prefill_params(start_sim)
    runner, prefill = await answering_prefill(params)
    try:
        url = await start_router(
            pair(prefill, decode), engine="vllm", pd_min_uncached_tokens=16, upstream_client=client
        )
        ask = {"messages": [{"role": "user", "content": LONG_PROMPT}]} if chat else {"prompt": LONG_PROMPT}
        body = {
            "model": MODEL,
            **ask,
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        path = "/v1/chat/completions" if chat else "/v1/completions"
        async with httpx.AsyncClient(timeout=20) as c:
            answer = await c.post(f"{url}{path}", json=body)
            listed = await backends(c, url)
    finally:
        await runner.cleanup()
    assert answer.status_code == 200, answer.text
    events = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert not [c for c in chunks if "error" in c]
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (1, 0)
    assert "could not load its KV" in str(listed["p"]["last_error"])


async def test_a_decode_failing_on_its_own_is_blamed_and_its_prefill_is_not(start_sim, start_router) -> None:
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.urls
    url = await start_router(pair(prefill, decode), engine="vllm", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=20) as c:
        await c.post(f"{decode}/admin/faults", json={"specs": ["error-rate=1.0:500"]})
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
        answer = await c.post(f"{url}/v1/completions", json=body)
        listed = await backends(c, url)
    assert answer.status_code == 502
    assert "last: d: HTTP 500" in answer.json()["error"]["message"]
    assert (listed["p"]["failed"], listed["d"]["failed"]) == (0, 1)
    assert listed["p"]["served"] == 1


async def test_a_failed_prefill_counts_against_the_prefill_upstream_group(start_sim, start_router) -> None:
    """Cutover gates compare groups: a prefill of group "new" failing must not count against "old"."""
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.urls
    backends = [
        Backend(id="p", url=prefill, role="prefill", group="g0", upstream="new"),
        Backend(id="d", url=decode, role="decode", group="g0", upstream="old"),
    ]
    url = await start_router(backends, engine="vllm", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=20) as c:
        await c.post(f"{prefill}/admin/faults", json={"specs": ["error-rate=1.0:503"]})
        body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}
        answer = await c.post(f"{url}/v1/completions", json=body)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert answer.status_code == 200, answer.text  # retried: the decode prefilled it itself
    rows = metrics["infctl_router_upstream_requests_total"]
    counted = {(s.labels["upstream"], s.labels["status"]): s.value for s in rows}
    assert counted == {("new", "5xx"): 1, ("old", "2xx"): 1}


@pytest.mark.parametrize("personality", ["sglang", "vllm"])
async def test_a_served_prefill_leg_counts_as_served_and_ends_the_failure_streak(
    start_sim, start_router, personality: str
) -> None:
    # Without it a prefill engine is ejected after any 3 failures between two probes, whatever it served.
    sim = await start_sim(personality=personality, instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.urls
    url = await start_router(pair(prefill, decode), engine=personality, pd_min_uncached_tokens=16)
    body = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 2}
    async with httpx.AsyncClient(timeout=20) as c:
        for _ in range(3):
            assert (await c.post(f"{url}/v1/completions", json=body)).status_code == 200
        listed = await backends(c, url)
    assert listed["p"]["served"] == 3 and listed["p"]["failed"] == 0
