"""The simulated engine's OpenAI surface, driver and lifecycle, on real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from infctl import tokens
from infctl.sim.profiles import get_profile

MODEL = get_profile("llama3-8b-h100").model


def words(n: int, salt: int = 0) -> str:
    return tokens.synth_words(n, salt)


async def post(url: str, path: str, body: Any, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}{path}", json=body, **kw)


async def sse_events(url: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
    """The raw ``data:`` payloads of a streamed response, checking the framing on the way."""
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{url}{path}", json=body) as resp,
    ):
        raw = (await resp.aread()).decode()
    assert raw.endswith("\n\n")
    events = raw[:-2].split("\n\n")
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    return resp, [e.removeprefix("data: ") for e in events]


async def test_completion_returns_max_tokens_words_and_usage(sim_url: str) -> None:
    resp = await post(
        sim_url, "/v1/completions", {"model": MODEL, "prompt": words(40), "max_tokens": 7, "seed": 3}
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-") and body["model"] == MODEL
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["text"] == "".join(" " + tokens.output_word(3, i) for i in range(7))
    assert tokens.count_tokens(choice["text"]) == 7
    assert body["usage"] == {
        "prompt_tokens": 40,
        "completion_tokens": 7,
        "total_tokens": 47,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert body["kv_transfer_params"] is None


async def test_repeated_prompt_is_served_from_the_prefix_cache(sim_url: str) -> None:
    prompt = words(100, salt=7)
    first = (await post(sim_url, "/v1/completions", {"prompt": prompt, "max_tokens": 2})).json()
    second = (await post(sim_url, "/v1/completions", {"prompt": prompt, "max_tokens": 2})).json()
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # Full 16-token blocks only, and never the last prompt token: (100 - 1) // 16 * 16.
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 96


async def test_chat_completion_counts_the_rendered_prompt(sim_url: str) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    resp = await post(sim_url, "/v1/chat/completions", {"messages": messages, "max_completion_tokens": 3})
    body = resp.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and tokens.count_tokens(message["content"]) == 3
    assert body["usage"]["prompt_tokens"] == tokens.count_tokens(tokens.chat_prompt_text(messages)) == 7


async def test_default_max_tokens(start_sim: Any) -> None:
    url = (await start_sim(max_default_tokens=5)).urls[0]
    completion = (await post(url, "/v1/completions", {"prompt": "hi"})).json()
    assert completion["usage"]["completion_tokens"] == 16
    chat = (await post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})).json()
    assert chat["usage"]["completion_tokens"] == 5


async def test_chat_stream_is_framed_like_vllm(sim_url: str) -> None:
    body = {
        "messages": [{"role": "user", "content": "stream please"}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    resp, events = await sse_events(sim_url, "/v1/chat/completions", body)
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    first, *content, usage = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in content] == [None, None, None, "length"]
    text = "".join(c["choices"][0]["delta"]["content"] for c in content)
    assert tokens.count_tokens(text) == 4
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 4
    assert usage["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}


async def test_completion_stream_without_usage(sim_url: str) -> None:
    _, events = await sse_events(
        sim_url, "/v1/completions", {"prompt": "a b c", "max_tokens": 3, "stream": True}
    )
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]" and len(chunks) == 3
    assert all("usage" not in c and c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[0]["choices"][0]["stop_reason"] is None


async def test_stream_interval_coalesces_tokens_but_not_the_first(start_sim: Any) -> None:
    url = (await start_sim(stream_interval=4)).urls[0]
    _, events = await sse_events(
        url, "/v1/completions", {"prompt": "a b c", "max_tokens": 10, "stream": True}
    )
    sizes = [tokens.count_tokens(json.loads(e)["choices"][0]["text"]) for e in events[:-1]]
    assert sizes == [1, 4, 4, 1]


async def test_request_id_is_kept_but_not_echoed_by_default(sim_url: str) -> None:
    """vLLM 0.32 without --enable-request-id-headers: the id names the answer, no answer carries it."""
    resp = await post(
        sim_url, "/v1/completions", {"prompt": "a", "max_tokens": 1}, headers={"x-request-id": "r-42"}
    )
    assert resp.json()["id"] == "cmpl-r-42"
    assert "x-request-id" not in resp.headers
    stream, _ = await sse_events(sim_url, "/v1/completions", {"prompt": "a", "max_tokens": 2, "stream": True})
    assert "x-request-id" not in stream.headers
    async with httpx.AsyncClient(timeout=30, headers={"x-request-id": "r-43"}) as client:
        for answer in (await client.get(f"{sim_url}/health"), await client.get(f"{sim_url}/nothing")):
            assert "x-request-id" not in answer.headers
    # The same id twice at once is still two requests.
    both = await asyncio.gather(
        *(
            post(
                sim_url, "/v1/completions", {"prompt": "a", "max_tokens": 3}, headers={"x-request-id": "dup"}
            )
            for _ in "ab"
        )
    )
    assert [r.status_code for r in both] == [200, 200]


async def test_request_id_headers_flag_echoes_it_on_every_answer(start_sim: Any) -> None:
    """--enable-request-id-headers (vLLM's XRequestIdMiddleware): the client's id, else a new one, on every
    answer: generation (plain and streamed), errors, other routes."""
    url = (await start_sim(enable_request_id_headers=True)).urls[0]
    mine = {"x-request-id": "r-42"}
    plain = await post(url, "/v1/completions", {"prompt": "a", "max_tokens": 1}, headers=mine)
    refused = await post(url, "/v1/completions", {"prompt": "a", "max_tokens": 0}, headers=mine)
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream(
            "POST", f"{url}/v1/chat/completions", headers=mine,
            json={"messages": [{"role": "user", "content": "a"}], "max_tokens": 2, "stream": True},
        ) as stream,
    ):  # fmt: skip
        await stream.aread()
        others = [await client.get(f"{url}{path}", headers=mine) for path in ("/health", "/nothing", "/load")]
        fresh = [await client.get(f"{url}/health"), await client.post(f"{url}/v1/models")]
    assert refused.status_code == 400
    for resp in (plain, refused, stream, *others):
        assert resp.headers.get_list("x-request-id") == ["r-42"], resp.request.url
    ids = [r.headers["x-request-id"] for r in fresh]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids) and ids[0] != ids[1]


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_head_on_a_get_route_is_405_as_fastapi_answers(start_sim: Any, personality: str) -> None:
    """FastAPI's GET routes do not answer HEAD (aiohttp's would): 405, ``Allow`` naming the first route's
    method, FastAPI's body; /metrics (prometheus_client's app, mounted) answers every method."""
    url = (await start_sim(personality=personality)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        head = await client.head(f"{url}/health")
        models = await client.head(f"{url}/v1/models")
        post_models = await client.post(f"{url}/v1/models")
        get_cmpl = await client.get(f"{url}/v1/completions")
        metrics = {m: await client.request(m, f"{url}/metrics") for m in ("HEAD", "POST")}
        missing = await client.head(f"{url}/nothing")
    for resp in (head, models, post_models):
        assert (resp.status_code, resp.headers["allow"]) == (405, "GET")
        assert resp.headers["content-type"] == "application/json"
    assert head.content == b"" and post_models.json() == {"detail": "Method Not Allowed"}
    assert (get_cmpl.status_code, get_cmpl.headers["allow"]) == (405, "POST")
    assert missing.status_code == 404 and "allow" not in missing.headers
    assert metrics["HEAD"].status_code == 200 and metrics["HEAD"].content == b""
    assert metrics["POST"].status_code == 200 and "# TYPE" in metrics["POST"].text


async def test_vllm_ping_405_names_its_first_route(start_sim: Any) -> None:
    """vLLM registers GET /ping before POST /ping; Starlette's 405 names the first: ``Allow: GET``. Its
    /metrics answers other methods from the mounted prometheus_client app, text format 0.0.4."""
    url = (await start_sim()).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        ping = [await client.request(m, f"{url}/ping") for m in ("HEAD", "PUT")]
        get, post_ = await client.get(f"{url}/metrics"), await client.post(f"{url}/metrics")
    assert [(r.status_code, r.headers["allow"]) for r in ping] == [(405, "GET"), (405, "GET")]
    assert get.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    assert post_.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_data_parallel_engine_answers_head_and_ids_alike(start_sim: Any, personality: str) -> None:
    url = (await start_sim(personality=personality, data_parallel_size=2)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        head = await client.head(f"{url}/health")
        metrics = await client.head(f"{url}/metrics")
        echoed = await client.get(f"{url}/health", headers={"x-request-id": "r-1"})
    assert (head.status_code, head.headers["allow"]) == (405, "GET")
    assert metrics.status_code == 200
    assert ("x-request-id" in echoed.headers) is (personality == "sglang")


@pytest.mark.parametrize(
    ("path", "body", "status", "err_type", "needle"),
    [
        (
            "/v1/completions",
            {"prompt": "x " * 40_000},
            400,
            "BadRequestError",
            "maximum context length is 32768",
        ),
        ("/v1/completions", {"prompt": "x", "max_tokens": 40_000}, 400, "BadRequestError", "max_model_len="),
        ("/v1/completions", {"max_tokens": 3}, 400, "BadRequestError", "prompt"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "BadRequestError", "at least 1"),
        ("/v1/chat/completions", {"messages": []}, 400, "BadRequestError", "empty conversation"),
        ("/v1/completions", {"prompt": "x", "model": "gpt-nope"}, 404, "NotFoundError", "gpt-nope"),
    ],
)
async def test_errors_are_shaped_like_vllm(
    sim_url: str, path: str, body: dict[str, Any], status: int, err_type: str, needle: str
) -> None:
    resp = await post(sim_url, path, body)
    assert resp.status_code == status
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == err_type and err["code"] == status and needle in err["message"]


async def test_invalid_json_and_unknown_routes(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        bad = await client.post(
            f"{sim_url}/v1/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        missing = await client.get(f"{sim_url}/v2/nothing")
    # vLLM's request model refuses it: its pydantic error, type "Bad Request", param the error's place.
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "Bad Request"
    assert bad.json()["error"]["param"] == "body.1"
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}


async def test_models_and_health(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        models = (await client.get(f"{sim_url}/v1/models")).json()
        health = await client.get(f"{sim_url}/health")
    card = models["data"][0]
    assert models["object"] == "list" and card["id"] == MODEL and card["max_model_len"] == 32_768
    assert card["owned_by"] == "vllm"
    assert health.status_code == 200 and health.content == b""


def _free_consecutive_ports(n: int) -> int:
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free consecutive ports")


async def test_instances_listen_on_consecutive_ports_and_keep_separate_state(
    start_sim: Any, scrape: Any
) -> None:
    base = _free_consecutive_ports(3)
    cluster = await start_sim(port=base, instances=3)
    assert cluster.urls == [f"http://127.0.0.1:{base + i}" for i in range(3)]
    await post(cluster.urls[1], "/v1/completions", {"prompt": words(20), "max_tokens": 2})
    prompt_tokens = [
        (await scrape(u))[f'vllm:prompt_tokens_total{{model_name="{MODEL}",engine="0"}}']
        for u in cluster.urls
    ]
    assert prompt_tokens == [0.0, 20.0, 0.0]


async def aborted_and_idle(
    scrape: Callable[[str], Awaitable[dict[str, float]]], url: str, deadline_s: float = 30
) -> dict[str, float]:
    """The engine's metrics once they count one aborted request and none running, polled until
    ``deadline_s`` (a loaded machine may take seconds to notice the disconnect); fails with what the last
    scrape saw. A request that ran to its end counts as finished for length, never as aborted."""
    labels = f'model_name="{MODEL}",engine="0"'
    abort, running = (
        f'vllm:request_success_total{{{labels},finished_reason="abort"}}',
        f"vllm:num_requests_running{{{labels}}}",
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    while True:
        samples = await scrape(url)
        seen = {"aborted": samples.get(abort), "running": samples.get(running)}
        if seen == {"aborted": 1.0, "running": 0.0}:
            return samples
        assert loop.time() < deadline, f"after {deadline_s} s: {seen} (want 1 aborted, 0 running)"
        await asyncio.sleep(0.05)


async def test_client_disconnect_aborts_the_request(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(time_scale=1.0)).urls[0]
    labels = f'model_name="{MODEL}",engine="0"'
    async with httpx.AsyncClient(timeout=30) as client:
        body = {"prompt": "a b c", "max_tokens": 2000, "stream": True}
        async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    break
        # Leaving the block closed the connection mid-stream.
    samples = await aborted_and_idle(scrape, url)
    assert samples[f"vllm:generation_tokens_total{{{labels}}}"] < 2000, samples


async def test_time_scale_sets_the_pace_and_metrics_report_simulated_seconds(
    start_sim: Any, scrape: Any
) -> None:
    scale = 0.1
    url = (await start_sim(time_scale=scale)).urls[0]
    profile = get_profile("llama3-8b-h100")
    expected = profile.expected_ttft(64) + 49 * profile.expected_itl(1)  # simulated seconds
    started = time.perf_counter()
    await post(url, "/v1/completions", {"prompt": words(64, salt=3), "max_tokens": 50})
    wall = time.perf_counter() - started
    assert wall >= expected * scale * 0.95  # tokens are never delivered before their step ends
    e2e = (await scrape(url))[f'vllm:e2e_request_latency_seconds_sum{{model_name="{MODEL}",engine="0"}}']
    assert e2e == pytest.approx(expected, rel=0.1)


async def test_non_streaming_client_that_gives_up_aborts_its_request(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(time_scale=1.0)).urls[0]
    with pytest.raises(httpx.ReadTimeout):
        async with httpx.AsyncClient(timeout=0.1) as client:
            await client.post(f"{url}/v1/completions", json={"prompt": "a", "max_tokens": 2000})
    await aborted_and_idle(scrape, url)


async def test_a_prompt_larger_than_the_kv_cache_is_refused(start_sim: Any) -> None:
    url = (await start_sim(num_gpu_blocks=4)).urls[0]  # 64 tokens of KV
    plain = await post(url, "/v1/completions", {"prompt": words(100), "max_tokens": 1})
    assert plain.status_code == 400 and "KV cache" in plain.json()["error"]["message"]
    _, events = await sse_events(
        url, "/v1/completions", {"prompt": words(100), "max_tokens": 1, "stream": True}
    )
    assert json.loads(events[0])["error"]["code"] == 400 and events[-1] == "[DONE]"


async def test_a_port_in_use_is_a_config_error(start_sim: Any) -> None:
    from infctl.errors import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match="cannot listen"):
            await start_sim(port=taken.getsockname()[1])


def test_cli_rejects_bad_flags_with_a_fix() -> None:
    from typer.testing import CliRunner

    from infctl.cli.main import _register, app

    _register()
    runner = CliRunner()
    for args, needle in ((["--role", "sideways"], "--role"), (["--fault", "explode"], "unknown fault")):
        result = runner.invoke(app, ["sim", *args])
        assert result.exit_code == 2, result.output
        assert needle in result.output


async def test_cli_serves_until_sigterm() -> None:
    import os
    import signal
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infctl", "sim", "--port", "0", "--instances", "2", "--personality", "sglang",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(2)]
        if not all("ready: " in line for line in lines):  # it exited: say why rather than an IndexError
            assert proc.stderr is not None
            err = (await asyncio.wait_for(proc.stderr.read(), 10)).decode()
            raise AssertionError(f"no ready lines: {lines!r}; stderr: {err[-2000:]}")
        urls = [line.split("ready: ")[1].split()[0] for line in lines]
        assert all("sglang sim (llama3-8b-h100, role both)" in line for line in lines)
        async with httpx.AsyncClient() as client:
            assert [(await client.get(f"{u}/health")).status_code for u in urls] == [200, 200]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
