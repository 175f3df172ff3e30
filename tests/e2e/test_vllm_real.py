"""Claims that must hold on a real engine, checked against two vLLM CPU engines behind the router.

Tests run in file order on one release; the last one kills an engine.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import MODEL_NAME, Release, hanzi

from infctl.engines import vllm as v
from infctl.errors import MetricsError
from infctl.sim.personality import vllm_metrics as unread
from infctl.telemetry.prometheus import parse_metrics
from infctl.telemetry.scrape import make_client, scrape
from infctl.telemetry.signals import EngineSignals
from infctl.tokenization import EngineTokenizer, load_tokenizer
from infctl.tokens import _WORDS

pytestmark = pytest.mark.slow
StartSim = Callable[..., Awaitable[Any]]


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def admin_headers(release: Release) -> dict[str, str]:
    """The router requires the token the local deploy generated (its summary names the file)."""
    token = Path(release.summary["admin_token"]["file"]).read_text().strip()
    return {"authorization": f"Bearer {token}"}


def stream_completion(url: str, body: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The parsed SSE chunks of one streamed completion, and whether ``[DONE]`` closed it."""
    chunks: list[dict[str, Any]] = []
    done = False
    with (
        httpx.Client(timeout=120, trust_env=False) as client,
        client.stream("POST", url, json={**body, "stream": True}) as resp,
    ):
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append(json.loads(line[6:]))
    return chunks, done


def text_and_usage(chunks: list[dict[str, Any]], chat: bool = False) -> tuple[str, dict[str, Any]]:
    key = (lambda c: c["delta"].get("content") or "") if chat else (lambda c: c["text"])
    text = "".join(key(ch) for c in chunks for ch in c["choices"])
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1, "exactly one usage chunk"
    return text, usage[0]


def test_stream_and_usage_relayed_intact(vllm_release: Release) -> None:
    """Greedy decoding, identical weights: the router's stream must carry an engine's own text and usage."""
    prompt = words(40, seed=1)
    body = {
        "model": MODEL_NAME,
        "prompt": prompt,
        "max_tokens": 24,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    direct, direct_done = stream_completion(vllm_release.engine_urls[0] + "/v1/completions", body)
    routed, routed_done = stream_completion(vllm_release.router_url + "/v1/completions", body)
    assert direct_done and routed_done
    d_text, d_usage = text_and_usage(direct)
    r_text, r_usage = text_and_usage(routed)
    assert r_text == d_text
    # Not chunk for chunk: vLLM merges the tokens of several steps into one chunk when its API server falls
    # behind the engine (seen here under load), so chunk counts differ run to run; ids must not.
    assert len({c["id"] for c in routed}) == 1
    assert len(routed) <= 24 + 1
    assert r_usage["prompt_tokens"] == d_usage["prompt_tokens"] == 40  # one token per listed word
    assert r_usage["completion_tokens"] == 24
    assert "cached_tokens" in r_usage["prompt_tokens_details"]  # --enable-prompt-tokens-details

    chat = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": words(30, seed=2)}],
        "max_tokens": 12,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    chunks, done = stream_completion(vllm_release.router_url + "/v1/chat/completions", chat)
    _, c_usage = text_and_usage(chunks, chat=True)
    # ChatML: <|im_start|> user \n (30 words) <|im_end|> \n, then <|im_start|> assistant \n.
    assert done and c_usage["completion_tokens"] == 12 and c_usage["prompt_tokens"] == 30 + 5 + 3

    with httpx.Client(timeout=60, trust_env=False) as client:
        plain_body = {k: v for k, v in body.items() if k != "stream_options"}  # vLLM: only when streaming
        plain = client.post(vllm_release.router_url + "/v1/completions", json={**plain_body, "max_tokens": 8})
    assert plain.status_code == 200
    assert plain.json()["usage"]["completion_tokens"] == 8


def test_tiny_tokenizer_is_multilingual_templated_and_matched_by_infctl(
    vllm_release: Release, tiny_model: Path
) -> None:
    """The tiny model tokenizes as a real multilingual model does (a Chinese prompt is hundreds of tokens, a
    chat prompt carries its template's special tokens), and infctl's tokenization layer, reading the
    model's files, gives vLLM's own ids for completion prompts and chat messages alike."""
    system = hanzi(600, seed=3)
    question = "请问今天的天气怎么样\uff1f"  # full-width question mark
    code = "def parse_config(path, strict=True):\n    with open(path) as f:\n        return json.load(f)\n"
    prompts = [
        words(40, seed=4),
        system + question,
        code,
        f"{words(5, seed=5)} 混合 text {hanzi(20, seed=6)}",
    ]
    conversations = [
        [{"role": "system", "content": system}, {"role": "user", "content": question}],
        [{"role": "user", "content": words(30, seed=2)}],
        [{"role": "user", "content": code}, {"role": "assistant", "content": "ok"},
         {"role": "user", "content": "?"}],
    ]  # fmt: skip
    ours = load_tokenizer(str(tiny_model))
    assert ours.exact
    url = vllm_release.engine_urls[0] + "/tokenize"
    with httpx.Client(timeout=60, trust_env=False) as client:
        real = [client.post(url, json={"model": MODEL_NAME, "prompt": p}).json() for p in prompts]
        chats = [client.post(url, json={"model": MODEL_NAME, "messages": m}).json() for m in conversations]
        usage = client.post(
            vllm_release.router_url + "/v1/chat/completions",
            json={"model": MODEL_NAME, "messages": conversations[0], "max_tokens": 1},
        ).json()["usage"]
    counts = [r["count"] for r in real]
    print(f"\nvLLM /tokenize: 40 words {counts[0]}, 611 Chinese characters {counts[1]}, code {counts[2]}, "
          f"mixed {counts[3]}; the Chinese chat {chats[0]['count']}")  # fmt: skip
    assert counts[0] == 40  # one token per listed word
    assert counts[1] >= 611  # each common hanzi at least one token (the old tokenizer: 3 tokens in all)
    assert [r["tokens"] for r in real] == [ours.encode(p) for p in prompts]
    assert [c["tokens"] for c in chats] == [ours.chat_ids(m) for m in conversations]
    im_start, im_end = chats[0]["tokens"][0], chats[0]["tokens"][-5]
    assert chats[0]["tokens"].count(im_start) == 3 and chats[0]["tokens"].count(im_end) == 2
    assert chats[0]["tokens"][-3] == im_start  # add_generation_prompt: <|im_start|> assistant \n
    assert (
        usage["prompt_tokens"] == chats[0]["count"] == ours.count(system) + ours.count(question) + 2 * 5 + 3
    )


def metric_families(url: str) -> dict[str, str]:
    """``family name -> type`` from the ``# TYPE`` lines of an engine's /metrics."""
    return families_of(httpx.get(url + "/metrics", timeout=10, trust_env=False).text)


def families_of(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE vllm:"):
            _, _, name, kind = line.split()
            if not name.endswith("_created"):
                out[name] = kind
    return out


def test_metric_names_match_the_adapter(vllm_release: Release) -> None:
    real = metric_families(vllm_release.engine_urls[0])
    signal_names = {*v._SIGNAL_GAUGES, *v._SIGNAL_COUNTERS, v.CACHE_CONFIG_INFO}
    assert signal_names <= set(real), f"signal metrics missing: {sorted(signal_names - set(real))}"
    assert {*v.HISTOGRAMS} <= {n for n, k in real.items() if k == "histogram"}
    # Recorded, not asserted: what this vLLM emits beyond what infctl knows, and the reverse.
    known = {*v.METRIC_NAMES, *v.DEPRECATED}
    print("\nvLLM emits, infctl does not know:", sorted(set(real) - known))
    print("infctl knows, this vLLM does not emit:", sorted(known - set(real)))


async def test_simulator_exposes_what_the_real_engine_does(
    vllm_release: Release, start_sim: StartSim
) -> None:
    """After one request each, the simulated vLLM offers every family the real one does (but those
    ``vllm_metrics.LEFT_OUT`` names, and why), with the same type and label names, and every family (and
    cache_config_info label) the router reads; a family a new vLLM adds fails here until the simulator has it
    or leaves it out saying why. cache_config_info's other labels are recorded, not asserted."""
    cluster = await start_sim(model=MODEL_NAME)
    body = {"model": MODEL_NAME, "prompt": "hello world", "max_tokens": 3}
    async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
        texts = []
        for url in (vllm_release.engine_urls[0], cluster.urls[0]):
            assert (await client.post(url + "/v1/completions", json=body)).status_code == 200
            texts.append((await client.get(url + "/metrics")).text)
    real_text, sim_text = texts
    real, sim = families_of(real_text), families_of(sim_text)
    signal_names = {*v._SIGNAL_GAUGES, *v._SIGNAL_COUNTERS, v.CACHE_CONFIG_INFO}
    assert signal_names <= set(sim)
    missing = set(real) - set(sim) - set(unread.LEFT_OUT)
    assert not missing, f"vLLM families the simulator lacks (sim/personality/vllm_metrics.py): {missing}"
    assert {n: k for n, k in sim.items() if n in real} == {n: real[n] for n in sim if n in real}  # same types
    real_fams, sim_fams = parse_metrics(real_text), parse_metrics(sim_text)

    def label_names(fams: Any, name: str) -> set[str]:
        return {k for sample in fams.get(name, ()) for k in sample.labels}

    differ = {
        name: sorted(label_names(real_fams, name) ^ label_names(sim_fams, name))
        for name in set(real) & set(sim) - {v.CACHE_CONFIG_INFO}
        if label_names(real_fams, name) != label_names(sim_fams, name)
    }
    assert not differ, f"label names only on one side: {differ}"
    real_labels = label_names(real_fams, v.CACHE_CONFIG_INFO)
    sim_labels = label_names(sim_fams, v.CACHE_CONFIG_INFO)
    assert {"block_size", "num_gpu_blocks", "enable_prefix_caching"} <= real_labels & sim_labels
    print("\nleft out by the simulator:", sorted(set(real) & set(unread.LEFT_OUT)))
    print("the simulator emits, vLLM does not:", sorted(set(sim) - set(real)))
    print("cache_config_info labels only in vLLM:", sorted(real_labels - sim_labels))
    print("cache_config_info labels only in the simulator:", sorted(sim_labels - real_labels))
    reasons = {s.labels.get("finished_reason") for s in real_fams.get(v.REQUEST_SUCCESS, ())}
    sim_reasons = {s.labels.get("finished_reason") for s in sim_fams.get(v.REQUEST_SUCCESS, ())}
    assert reasons == sim_reasons


async def test_signals_parsed_from_real_metrics(vllm_release: Release) -> None:
    async with make_client() as client:
        # Idle once the earlier tests' requests are done: polled, since vLLM publishes its gauges with the
        # engine's steps and a loaded machine may lag (the timeline says what was seen).
        idle = [
            await scrape_until(client, url, is_idle, deadline_s=120, what="idle")
            for url in vllm_release.engine_urls
        ]
        for sig in idle:
            assert sig.queue == 0 and sig.running == 0
            assert sig.kv_usage is not None and 0 <= sig.kv_usage < 0.01
            assert sig.model_names == (MODEL_NAME,) or set(sig.model_names) == {MODEL_NAME}
            assert sig.block_size == 128  # vLLM's CPU attention backend; the GPU default is 16
            assert sig.cache_capacity_tokens == 1024**3 // 1024  # 1 GiB of KV at 1 KiB per token
            assert sig.prefix_caching is True
            assert sig.deprecated == ()

        # Load one engine with long generations and watch running/queue/kv_usage move. vLLM's API server
        # answers /metrics on the loop that also drains the engine's outputs, so on a loaded 2-core machine a
        # scrape can stall until the whole load is done (CI once saw only idle scrapes): up to three rounds,
        # stopping at the first that sees the load in flight (longer each time, within the 4096 context).
        url = vllm_release.engine_urls[0]
        busiest, rounds, timeline = idle[0], 0, []
        while rounds < 3 and not (busiest.running >= 1 and busiest.running + busiest.queue >= 2):
            rounds += 1
            busiest, seen = await watch_load(client, url, busiest, max_tokens=1000 + 500 * rounds)
            timeline.append(seen)
        assert busiest.running >= 1 and busiest.running + busiest.queue >= 2, (busiest, timeline)
        assert busiest.kv_usage is not None and busiest.kv_usage > 0

        # The token counters: every round's six 600-token prompts and its generations (at least 1500 tokens
        # each). Polled: counters only grow, and the claim is that they reach what was sent.
        def counted(sig: EngineSignals) -> bool:
            return (
                sig.prompt_tokens - idle[0].prompt_tokens >= rounds * 6 * 600
                and sig.generation_tokens - idle[0].generation_tokens >= rounds * 6 * 1500
                and sig.prefix_queries - idle[0].prefix_queries >= rounds * 6 * 600
            )

        await scrape_until(client, url, counted, deadline_s=60, what=f"the counters of {rounds} round(s)")


def is_idle(sig: EngineSignals) -> bool:
    return sig.queue == 0 and sig.running == 0 and sig.kv_usage is not None and sig.kv_usage < 0.01


def describe(sig: EngineSignals) -> str:
    return (
        f"running={sig.running} queue={sig.queue} kv={sig.kv_usage} prompt={sig.prompt_tokens} "
        f"generated={sig.generation_tokens} prefix_queries={sig.prefix_queries}"
    )


async def scrape_until(
    client: httpx.AsyncClient,
    url: str,
    ok: Callable[[EngineSignals], bool],
    *,
    deadline_s: float,
    what: str,
) -> EngineSignals:
    """Scrape ``url`` every half second until ``ok`` holds; fails after ``deadline_s`` with every scrape seen
    (a scrape that times out is recorded as stalled, not fatal: vLLM's API server lags under load)."""
    t0 = time.monotonic()
    timeline: list[str] = []
    while True:
        try:
            sig = await scrape(client, url, v.ADAPTER)
        except MetricsError as exc:
            timeline.append(f"{time.monotonic() - t0:.1f}s stalled: {exc.message}")
        else:
            if ok(sig):
                return sig
            timeline.append(f"{time.monotonic() - t0:.1f}s {describe(sig)}")
        if time.monotonic() > t0 + deadline_s:
            raise AssertionError(f"{url} never showed {what} in {deadline_s:.0f} s:\n" + "\n".join(timeline))
        await asyncio.sleep(0.5)


async def watch_load(
    client: httpx.AsyncClient, url: str, busiest: EngineSignals, max_tokens: int
) -> tuple[EngineSignals, list[str]]:
    """Six long generations on one engine, scraped every 50 ms until they end; returns the busiest signals
    seen (or ``busiest`` unchanged) and the timeline of scrapes for a failure message (a scrape that times
    out is recorded as stalled and the watch goes on)."""
    body = {"model": MODEL_NAME, "max_tokens": max_tokens, "ignore_eos": True}
    timeline: list[str] = []
    async with httpx.AsyncClient(timeout=300, trust_env=False) as load:
        jobs = [
            asyncio.create_task(load.post(url + "/v1/completions", json={**body, "prompt": words(600, i)}))
            for i in range(100, 106)
        ]
        t0 = time.monotonic()
        while not all(j.done() for j in jobs) and time.monotonic() < t0 + 120:
            try:
                sig = await scrape(client, url, v.ADAPTER)
            except MetricsError as exc:
                timeline.append(f"{time.monotonic() - t0:.2f}s stalled ({exc.message})")
            else:
                timeline.append(f"{time.monotonic() - t0:.2f}s r={sig.running} q={sig.queue}")
                if sig.running + sig.queue > busiest.running + busiest.queue:
                    busiest = sig
            await asyncio.sleep(0.05)
        results = await asyncio.gather(*jobs)
    assert all(r.status_code == 200 for r in results), [r.text[:200] for r in results]
    return busiest, timeline


def prefix_counters(release: Release) -> tuple[float, float]:
    queries = hits = 0.0
    for url in release.engine_urls:
        fams = parse_metrics(httpx.get(url + "/metrics", timeout=10, trust_env=False).text)
        queries += sum(s.value for s in fams.get(v.PREFIX_CACHE_QUERIES, ()))
        hits += sum(s.value for s in fams.get(v.PREFIX_CACHE_HITS, ()))
    return queries, hits


def run_shared_prefix_workload(release: Release, policy: str, seed: int) -> float:
    """5 shared 512-token prefixes (4 of vLLM's 128-token CPU blocks) x 4 rounds in shuffled order, each
    with a unique suffix; returns vLLM's own hits/queries ratio over the run, summed over both engines."""
    with httpx.Client(timeout=120, trust_env=False) as client:
        resp = client.put(release.router_url + "/admin/policy", json=policy, headers=admin_headers(release))
        assert resp.status_code == 200, resp.text
        prefixes = [words(512, seed * 100 + p) for p in range(5)]
        order = [(r, p) for r in range(4) for p in range(5)]
        random.Random(seed).shuffle(order)
        q0, h0 = prefix_counters(release)
        for r, p in order:
            prompt = f"{prefixes[p]} {words(40, seed * 1000 + r * 10 + p)}"
            body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 2, "ignore_eos": True}
            assert client.post(release.router_url + "/v1/completions", json=body).status_code == 200
        q1, h1 = prefix_counters(release)
    assert q1 - q0 >= 20 * 552
    return (h1 - h0) / (q1 - q0)


@pytest.mark.parametrize("policy", ["prefix", "cache_aware"])
def test_prefix_routing_raises_vllm_prefix_hit_ratio(vllm_release: Release, policy: str) -> None:
    seed = 7 if policy == "prefix" else 11
    baseline = run_shared_prefix_workload(vllm_release, "round_robin", seed=seed)
    routed = run_shared_prefix_workload(vllm_release, policy, seed=seed + 1)
    print(f"\nvLLM prefix_cache_hits/queries: round_robin {baseline:.3f}, {policy} {routed:.3f}")
    # Round robin computes each prefix on both engines (2 misses of 4); prefix affinity on one (1 of 4).
    assert routed > baseline + 0.1


def router_counter(release: Release, name: str) -> float:
    text = httpx.get(release.router_url + "/metrics", timeout=10, trust_env=False).text
    return sum(float(x.rpartition(" ")[2]) for x in text.splitlines() if x.startswith(name + " "))


def settled_counter(release: Release, name: str, quiet_s: float = 1.0, timeout_s: float = 60) -> float:
    """The counter once it has stayed still for ``quiet_s``. Counts of an earlier test's prompts routed on the
    estimate land after their responses: CI read 1381 for a 272-token prompt (two ~555-token ones late)."""
    deadline = time.monotonic() + timeout_s
    last = router_counter(release, name)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = router_counter(release, name)
        if now == last:
            return now
        last = now
    raise AssertionError(f"{name} still moving after {timeout_s} s")


def mixed_request(rng: random.Random, i: int) -> tuple[str, dict[str, Any]]:
    """One of English, Chinese, mixed or code text, as a completion (every third a batch: of strings, or
    of token-id lists) or a chat (system + user; every third an agent's turns: an assistant's tool calls
    with ``content`` null or missing, the tools' results)."""
    kind = ("english", "chinese", "mixed", "code")[i % 4]
    n = rng.randint(5, 400)
    text = {
        "english": lambda: words(n, 10_000 + i),
        "chinese": lambda: hanzi(n, 20_000 + i),
        "mixed": lambda: f"{words(n // 4, i)} 中文 {hanzi(n // 2, i)} ok\n{words(3, i + 1)}",
        "code": lambda: "".join(f"    x_{k} = f({k}, '{hanzi(2, k)}')\n" for k in range(n // 10 + 1)),
    }[kind]()
    if i % 2:
        messages = [{"role": "system", "content": hanzi(30, i)}, {"role": "user", "content": text}]
        if i % 3 == 0:
            messages += agent_turns(rng, i)
        return "/v1/chat/completions", {"model": MODEL_NAME, "messages": messages, "max_tokens": 1}
    prompt: str | list[str] | list[list[int]] = text
    if i % 3 == 0 and i % 4 == 0:
        prompt = [text, text[: len(text) // 2] + hanzi(5, i), words(rng.randint(1, 30), 30_000 + i)]
    elif i % 3 == 0:  # the tiny model's vocabulary: 4,096 ids
        prompt = [
            [rng.randrange(3, 4096) for _ in range(rng.randint(1, 300))] for _ in range(rng.randint(2, 4))
        ]
    return "/v1/completions", {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1}


def agent_turns(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """An assistant's tool calls (OpenAI agents send ``content: null``; some clients leave it out) and the
    tools' results (a string, or text parts), then a user's follow-up."""
    calls = [
        {
            "id": f"call_{i}_{k}",
            "type": "function",
            "function": {
                "name": f"lookup_{k}",
                "arguments": json.dumps({"q": hanzi(rng.randint(1, 20), i + k)}, ensure_ascii=False),
            },
        }
        for k in range(rng.randint(1, 3))
    ]
    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
    if i % 4 == 1:
        assistant["content"] = None
    results: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": c["id"], "content": words(rng.randint(1, 40), i + k)}
        if k % 2 == 0
        else {"role": "tool", "tool_call_id": c["id"], "content": [{"type": "text", "text": hanzi(9, k)}]}
        for k, c in enumerate(calls)
    ]
    return [assistant, *results, {"role": "user", "content": words(5, i)}]


OWN_TEMPLATE = (
    "{%- if tools %}<<tools>>{{ tools | tojson }}\n{% endif -%}"
    "{%- for m in messages -%}<<{{ m.role }}>>{{ m.content }}"
    "{%- if m.tool_calls is defined %}{% for c in m.tool_calls %}"
    "[{{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}{% endif %}\n"
    "{% endfor %}{%- if add_generation_prompt %}<<assistant>>{% endif -%}"
)
"""A chat request's own template (vLLM renders it with --trust-request-chat-template): tools, roles, contents
and tool calls written differently from the model's ChatML."""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "查 a word",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    },
    {"type": "function", "function": {"name": "now"}},
]
"""Tools as clients send them; vLLM hands the template its own dump of them (a missing description null)."""


THINKING_TEMPLATE = OWN_TEMPLATE + (
    "{%- if enable_thinking is defined and not enable_thinking %}<think></think>{% endif -%}"
    "{%- if reasoning_effort is defined %}effort {{ reasoning_effort }}{% endif -%}"
)
"""A thinking model's template (Qwen3's ``enable_thinking``, a ``reasoning_effort`` line): the tiny model's
reads neither."""


def template_extras(body: dict[str, Any], i: int) -> None:
    """Chat features vLLM renders its own way, on some of the chats: the request's own template (or an empty
    one, the model's), or one in ``chat_template_kwargs`` (with ``tokenize``, which is no template
    variable); a thinking template with ``reasoning_effort`` (and the ``enable_thinking`` vLLM derives from
    it, or the kwargs set); ``developer`` messages (system ones for these templates: merged into the first
    system message, or alone first); ``tools`` (with ``tool_choice`` none: these engines parse no tool
    calls)."""
    if i % 10 == 1:
        body["chat_template"] = THINKING_TEMPLATE
        body["reasoning_effort"] = ("none", "high", "low", None)[i // 10 % 4]
        if i % 30 == 21:
            body["chat_template_kwargs"] = {"enable_thinking": i % 60 == 21, "reasoning_effort": "medium"}
    elif i % 5 in (1, 3):
        body["chat_template"] = OWN_TEMPLATE if i % 5 == 1 else ""
    elif i % 7 == 0:
        body["chat_template_kwargs"] = {"chat_template": OWN_TEMPLATE, "tokenize": i % 3 == 0}
    messages = body["messages"]
    if i % 3 == 1:
        messages.insert(1 + i % 4 // 2, {"role": "developer", "content": words(7, 40_000 + i)})
    elif i % 9 == 5:
        messages[0] = {"role": "developer", "content": [{"type": "text", "text": hanzi(12, i)}]}
    if i % 4 == 3:
        body["tools"], body["tool_choice"] = TOOLS, "none"


def test_router_counts_every_prompt_as_vllm_does(vllm_release: Release) -> None:
    """200 random prompts in English, Chinese, mixed text and code, chat (agent turns with tool calls among
    them; some carrying their own ``chat_template``, or an empty one, which is the model's, a thinking
    template with ``reasoning_effort``, developer messages or tools: ``template_extras``) and completion
    (batches among them): the router's own count of each (its prompt-tokens counter, one request at a time)
    is vLLM's ``usage.prompt_tokens``, a batch's summed over its prompts."""
    rng = random.Random(17)
    wrong: list[str] = []
    settled_counter(vllm_release, "infctl_router_prompt_tokens_total")
    with httpx.Client(timeout=120, trust_env=False) as client:
        for i in range(200):
            path, body = mixed_request(rng, i)
            if "messages" in body:
                template_extras(body, i)
            before = router_counter(vllm_release, "infctl_router_prompt_tokens_total")
            resp = client.post(vllm_release.router_url + path, json=body)
            assert resp.status_code == 200, resp.text
            counted = router_counter(vllm_release, "infctl_router_prompt_tokens_total") - before
            for _ in range(100):  # a request routed on the estimate is added once counted, just after
                if counted == resp.json()["usage"]["prompt_tokens"]:
                    break
                time.sleep(0.02)
                counted = router_counter(vllm_release, "infctl_router_prompt_tokens_total") - before
            if counted != resp.json()["usage"]["prompt_tokens"]:
                wrong.append(f"{i} {path}: router {counted}, vLLM {resp.json()['usage']['prompt_tokens']}")
    assert not wrong, wrong


def test_engine_tokenizer_counts_every_prompt_as_vllm_does(vllm_release: Release) -> None:
    """``--tokenizer engine`` with no tokenizer files: vLLM's own ``/tokenize`` through ``EngineTokenizer``
    counts 60 random prompts (English, Chinese, mixed, code; chat, agent turns, completion and batches) as
    vLLM's ``usage.prompt_tokens`` does, past a dead engine listed first, and asks again for none of them."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    tok = EngineTokenizer([dead, *vllm_release.engine_urls])
    rng = random.Random(23)
    bodies = [mixed_request(rng, i) for i in range(60)]

    def count(body: dict[str, Any]) -> int:
        if "messages" in body:
            return len(tok.chat_ids(body["messages"]))
        batch = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        return sum(tok.count(p) if isinstance(p, str) else len(p) for p in batch)  # vLLM's usage: the sum

    batches = [b["prompt"] for _, b in bodies if isinstance(b.get("prompt"), list)]
    prompts = [*batches, *([b["prompt"]] for _, b in bodies if isinstance(b.get("prompt"), str))]
    texts = {p for batch in prompts for p in batch if isinstance(p, str)}  # token ids need no /tokenize
    asked = len(texts) + sum("messages" in b for _, b in bodies)

    wrong: list[str] = []
    with httpx.Client(timeout=120, trust_env=False) as client:
        for i, (path, body) in enumerate(bodies):
            resp = client.post(vllm_release.engine_urls[0] + path, json=body)
            assert resp.status_code == 200, resp.text
            if count(body) != resp.json()["usage"]["prompt_tokens"]:
                wrong.append(
                    f"{i} {path}: /tokenize {count(body)}, usage {resp.json()['usage']['prompt_tokens']}"
                )
    assert not wrong, wrong
    assert tok.posts == asked  # one per text or chat: the dead engine failed its /v1/models, passed over
    again = [count(b) for _, b in bodies]  # all remembered: nothing sent
    assert tok.posts == asked and len(again) == len(bodies)
    tok.close()


def run_chinese_system_prompts(release: Release, policy: str, seed: int) -> float:
    """Six Chinese system prompts (~2,000 tokens, 15 of vLLM's 128-token CPU blocks), each asked three
    short Chinese questions in a row (a user's session), through the chat API; vLLM's own hits/queries."""
    with httpx.Client(timeout=120, trust_env=False) as client:
        resp = client.put(release.router_url + "/admin/policy", json=policy, headers=admin_headers(release))
        assert resp.status_code == 200, resp.text
        q0, h0 = prefix_counters(release)
        for p in range(6):
            system = hanzi(1500, seed * 100 + p)
            for turn in range(3):
                question = hanzi(12, seed * 1000 + p * 10 + turn) + "\uff1f"
                messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
                body = {"model": MODEL_NAME, "messages": messages, "max_tokens": 2, "ignore_eos": True}
                assert client.post(release.router_url + "/v1/chat/completions", json=body).status_code == 200
        q1, h1 = prefix_counters(release)
    return (h1 - h0) / (q1 - q0)


def test_cache_aware_routing_of_chinese_prompts_raises_vllm_hit_ratio(vllm_release: Release) -> None:
    baseline = run_chinese_system_prompts(vllm_release, "round_robin", seed=31)
    routed = run_chinese_system_prompts(vllm_release, "cache_aware", seed=32)
    print(f"\nChinese system prompts, vLLM prefix_cache_hits/queries: round_robin {baseline:.3f}, "
          f"cache_aware {routed:.3f}")  # fmt: skip
    # Round robin computes each prompt on both engines (1 hit of 3), cache-aware routing on one (2 of 3).
    assert routed >= baseline + 0.2


def backends(release: Release) -> list[dict[str, Any]]:
    resp = httpx.get(
        release.router_url + "/admin/backends", headers=admin_headers(release), timeout=10, trust_env=False
    )
    resp.raise_for_status()
    out: list[dict[str, Any]] = resp.json()["backends"]
    return out


def test_killed_engine_is_ejected_and_requests_keep_succeeding(vllm_release: Release) -> None:
    with httpx.Client(timeout=10, trust_env=False) as client:
        resp = client.put(
            vllm_release.router_url + "/admin/policy", json="round_robin", headers=admin_headers(vllm_release)
        )
        assert resp.status_code == 200, resp.text
    status = vllm_release.infctl("status", "--release", vllm_release.name)
    dead_url, live_url = vllm_release.engine_urls[1], vllm_release.engine_urls[0]
    victim = next(p for p in status["processes"] if p["url"] == dead_url)
    # The lifetime count as well as the flag: the supervisor restarts the engine, and on a fast machine it
    # could be back (and re-admitted) between two looks at the flag.
    ejections_before = backends_by_url(vllm_release)[dead_url]["ejections"]
    os.killpg(victim["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    body = {"model": MODEL_NAME, "max_tokens": 4, "ignore_eos": True}
    codes: list[int] = []
    timeline: list[str] = []
    ejected_after: float | None = None
    # At least 12 requests while the engine is down, and until the router has ejected it (or 3 minutes: a
    # router that never ejects fails below, with what it reported meanwhile).
    with httpx.Client(timeout=60, trust_env=False) as client:
        for i in itertools.count():
            resp = client.post(
                vllm_release.router_url + "/v1/completions", json={**body, "prompt": words(20, 500 + i)}
            )
            codes.append(resp.status_code)
            state = backends_by_url(vllm_release)
            dead = state[dead_url]
            now = time.monotonic() - killed_at
            timeline.append(f"{now:.1f}s {resp.status_code} ejected={dead['ejected']} ({dead['ejections']})")
            if ejected_after is None and (dead["ejected"] or dead["ejections"] > ejections_before):
                ejected_after = now
            if i >= 11 and (ejected_after is not None or now > 180):
                break
            time.sleep(0.25)
    print(f"\nkilled engine ejected after {ejected_after} s; {len(codes)} requests meanwhile")
    assert codes == [200] * len(codes), timeline
    assert ejected_after is not None, (dead, timeline, vllm_release.log_tail("router"))
    assert state[live_url]["ejected"] is False, (state[live_url], timeline)

    # The supervisor restarts the engine; the router re-admits it once its health probe passes.
    deadline = time.monotonic() + 420
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            back = backends_by_url(vllm_release)[dead_url]
        except httpx.HTTPError as exc:  # the router itself slow to answer on a loaded machine: look again
            seen.append(f"{time.monotonic() - killed_at:.0f}s admin API: {exc!r}")
        else:
            if not back["ejected"]:
                break
            last = f"ejected, last_error={back['last_error']}"
            if not seen or seen[-1] != last:
                seen.append(last)
        time.sleep(2)
    back = backends_by_url(vllm_release)[dead_url]
    print(f"re-admitted after {time.monotonic() - killed_at:.0f} s")
    assert back["ejected"] is False, (back, seen, vllm_release.log_tail("supervisor"))


def backends_by_url(release: Release) -> dict[str, dict[str, Any]]:
    return {b["url"]: b for b in backends(release)}
