"""Real prefill/decode disaggregation: a prefill and a decode vLLM (CPU build) moving the KV cache over NIXL
(UCX on the host, ``kv_buffer_device: cpu``), deployed by ``infctl deploy --target local`` (group mode, one
prefill and one decode engine, each with its own NIXL side-channel port) and paired by ``infctl router``.

- A disaggregated request's output equals an aggregated engine's token for token (and its logprobs within
  :data:`LOGPROB_TOLERANCE`) under greedy decoding: prompts of 1-4 of vLLM's 128-token CPU blocks (through
  a second router that disaggregates every uncached prompt, ``pd_min_uncached_tokens: 0``: the local
  target's router keeps the default 512), of several thousand tokens and a Chinese chat (through the
  release's own router, which counts with the model's tokenizer), streamed and not. The aggregated reference
  is the prefill engine serving the request alone with a ``cache_salt`` of its own, so it computes the
  prompt afresh.
- vLLM's counters show the hand-off: the decode engine took every prompt token as external KV
  (``vllm:external_prefix_cache_hits_total``), computed none and found none in its own cache, and received
  exactly the prompt's blocks (``vllm:nixl_bytes_transferred``); the prefill engine computed the prompt.
- A batch of three prompts: one choice per prompt, usage their sum, every prompt's KV at the decode engine
  and the output the aggregated engine's (vLLM's prefill answer carries the first prompt's
  ``kv_transfer_params`` only: the router splits the batch, ``infctl.router.pd_batch``).
- Killing the prefill engine mid-run: every request ends (none hangs) and succeeds, the decode engine
  prefilling for itself once the prefill is gone.

A request whose NIXL transfer vLLM counts as failed (UCX on loopback; :class:`TransportFailed`) is sent
once more with a fresh prompt; two in a row fail the test.

Slow (two engines start in ~2-3 minutes on two cores, concurrently); ``.ci/slow`` installs NIXL into the vLLM
venv. Without it every test here is skipped, saying so.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from e2e_support import (
    MODEL_NAME,
    REPO,
    Release,
    deployed,
    free_port_block,
    hanzi,
    pd_engine_command,
    tiny_vllm_model,
)

from infctl.engines import vllm_pd
from infctl.router.pd_legs import pd_endpoint
from infctl.telemetry.prometheus import parse_metrics
from infctl.tokens import _WORDS

pytestmark = pytest.mark.slow
BLOCK = 128
"""vLLM's KV block on the CPU platform, in tokens."""
OUTPUT_TOKENS = 16
EXTERNAL_HITS = "vllm:external_prefix_cache_hits_total"
LOCAL_HITS = "vllm:prefix_cache_hits_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
QUERIES = "vllm:prefix_cache_queries_total"
NIXL_BYTES = "vllm:nixl_bytes_transferred_sum"
NIXL_FAILED = "vllm:nixl_num_failed_transfers_total"
COUNTERS = (EXTERNAL_HITS, LOCAL_HITS, PROMPT_TOKENS, QUERIES, NIXL_BYTES, NIXL_FAILED)
POLL_S = 120.0
"""How long a counter may take to show a finished request (vLLM publishes them with its engine's steps)."""
LOGPROB_TOLERANCE = 1e-3
"""Not bit for bit: the decode engine computes the first token over KV it received, the aggregated engine in
its last prefill chunk, different attention kernels (1.2e-5 apart once in a 2,600-token prompt's first
token; equal to the bit in most runs)."""
GUARD_S = 600.0
"""The failover run must end within this: a request that hangs fails the test instead of the stage."""


@pytest.fixture(scope="module")
def nixl(vllm_python: str) -> None:
    probe = subprocess.run([vllm_python, "-c", "import nixl"], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip(f"{vllm_python} cannot import nixl (.ci/slow installs it): {probe.stderr.strip()[-300:]}")


@pytest.fixture(scope="module")
def pd_release(nixl: None, vllm_python: str, tiny_model: Path) -> Iterator[Release]:
    model = tiny_vllm_model(tiny_model, pd={"kv_connector": "nixl"})
    profile = {
        "name": "e2e-vllm-pd",
        "target": "local",
        "mode": "group",
        "groups": 1,
        "group": {"prefill": 1, "decode": 1},
        "model": model,
        "router": {"enabled": True, "policy": "cache_aware"},
        "local": {"simulate": False, "engine_command": pd_engine_command(vllm_python, model)},
    }
    with deployed(profile) as release:
        yield release


@dataclass(frozen=True)
class Engines:
    prefill: str
    decode: str


@pytest.fixture(scope="module")
def engines(pd_release: Release) -> Engines:
    by_role = {p["role"]: p["url"] for p in pd_release.summary["processes"] if p["kind"] == "engine"}
    return Engines(prefill=by_role["prefill"], decode=by_role["decode"])


@pytest.fixture(scope="module")
def eager_router(pd_release: Release, engines: Engines, tiny_model: Path) -> Iterator[str]:
    """A second ``infctl router`` in front of the release's engines that disaggregates every uncached prompt
    (the local target offers no way to lower ``pd_min_uncached_tokens``), on vLLM's block and the model's
    tokenizer."""
    work = Path(tempfile.mkdtemp(prefix="infctl-e2e-pd-router-"))
    port = free_port_block(1)
    config = {
        "backends": [
            {"url": engines.prefill, "role": "prefill", "group": "g0"},
            {"url": engines.decode, "role": "decode", "group": "g0"},
        ],
        "engine": "vllm",
        "policy": "cache_aware",
        "port": port,
        "pd_mode": "group",
        "pd_min_uncached_tokens": 0,
        "block_size": BLOCK,
        "tokenizer": str(tiny_model),
    }
    (work / "router.yaml").write_text(yaml.safe_dump(config))
    log = (work / "router.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k != "INFCTL_ROUTER_ADMIN_TOKEN"}
    argv = [sys.executable, "-m", "infctl", "router", "-f", str(work / "router.yaml")]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, work / "router.log")
        yield url
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"router exited {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=5, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"router at {url} not healthy in 120 s:\n{log.read_text()[-2000:]}")


def words(n: int, seed: int) -> str:
    """``n`` words of infctl's list: ``n`` tokens of the tiny model."""
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def counters(url: str) -> dict[str, float]:
    fams = parse_metrics(httpx.get(url + "/metrics", timeout=60, trust_env=False).text)
    return {name: sum(s.value for s in fams.get(name, ())) for name in COUNTERS}


def kv_bytes_per_token(url: str) -> int:
    fams = parse_metrics(httpx.get(url + "/metrics", timeout=60, trust_env=False).text)
    labels = fams["vllm:cache_config_info"][0].labels
    return int(labels["kv_cache_memory_bytes"]) // int(labels["kv_cache_size_tokens"])


def decisions(router_url: str) -> dict[str, float]:
    """The router's routing decisions by reason (``disaggregated``, ``local_prefill``, ...)."""
    text = httpx.get(router_url + "/metrics", timeout=30, trust_env=False).text
    out: dict[str, float] = {}
    for s in parse_metrics(text).get("infctl_router_decisions_total", ()):
        out[s.labels["reason"]] = out.get(s.labels["reason"], 0.0) + s.value
    return out


def admin_headers(release: Release, router_url: str) -> dict[str, str]:
    """The release's router requires the token the local deploy generated; the eager router has none."""
    if router_url != release.router_url:
        return {}
    token = Path(release.summary["admin_token"]["file"]).read_text().strip()
    return {"authorization": f"Bearer {token}"}


def wait_routable(router_url: str, headers: dict[str, str]) -> None:
    """Until the router has every backend in rotation: on two busy cores a vLLM API server can miss a 2 s
    health probe (seen while the other engine compiled a new shape), and a request routed in the seconds
    before the next probe re-admits it would find no decode engine."""
    poll(
        lambda: httpx.get(
            router_url + "/admin/backends", headers=headers, timeout=30, trust_env=False
        ).json(),
        lambda seen: all(not b["ejected"] for b in seen["backends"]),
        f"every backend of {router_url} in rotation",
    )


def poll(read: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    deadline, seen = time.monotonic() + POLL_S, []
    while True:
        now = read()
        if done(now):
            return now
        seen.append(now)
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen in {POLL_S:.0f} s; last reads: {seen[-3:]}")
        time.sleep(0.5)


class TransportFailed(AssertionError):
    """vLLM counted a failed NIXL transfer (``vllm:nixl_num_failed_transfers``) and recomputed the prompt.
    Seen in the batch right after the kill test's prefill engine came back (CI of 53a2f9b, and a rerun),
    and once in a first request; the other requests, with the same router and engines, moved their KV
    cleanly, and isolated reruns of both tests passed. The cause is not pinned down yet (a decode engine
    holding the restarted prefill's old NIXL agent metadata is the suspect)."""


def until_kv(engines: Engines, decode0: dict[str, float], arrived: Callable[[dict[str, float]], bool],
             what: str) -> dict[str, float]:  # fmt: skip
    """The decode engine's counters once ``arrived`` holds; TransportFailed as soon as vLLM counts a failed
    NIXL transfer instead (it then recomputes the prompt, so the KV never arrives)."""

    def settled(now: dict[str, float]) -> bool:
        return arrived(now) or now[NIXL_FAILED] > decode0[NIXL_FAILED]

    now = poll(lambda: counters(engines.decode), settled, what)
    if now[NIXL_FAILED] > decode0[NIXL_FAILED]:
        raise TransportFailed(f"{what}: vLLM counted a failed NIXL transfer: {now}")
    return now


def once_more_on_transport_failure(attempt: Callable[[], None]) -> None:
    """``attempt`` (a fresh prompt each time), run again once if vLLM's NIXL transport failed it: the check
    is that infctl's PD moves the KV, and a second transport failure in a row still fails the test."""
    try:
        attempt()
    except TransportFailed as exc:
        print(f"\nretrying once with a fresh prompt: {exc}")
        attempt()


@dataclass(frozen=True)
class Output:
    token_ids: list[int]
    logprobs: list[float]
    prompt_tokens: int
    completion_tokens: int


def generate(url: str, body: dict[str, Any], *, chat: bool, stream: bool) -> Output:
    """One greedy request's token ids and their logprobs, streamed or not."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    logprob_args = {"logprobs": True, "top_logprobs": 1} if chat else {"logprobs": 1}
    full = {**body, **logprob_args, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    with httpx.Client(timeout=300, trust_env=False) as client:
        if not stream:
            resp = client.post(url + path, json=full)
            assert resp.status_code == 200, resp.text[:500]
            data = resp.json()
            return Output(*_ids_and_logprobs(data["choices"][0], chat), *_usage(data["usage"]))
        ids: list[int] = []
        logprobs: list[float] = []
        usage: dict[str, Any] = {}
        streamed = {**full, "stream": True, "stream_options": {"include_usage": True}}
        with client.stream("POST", url + path, json=streamed) as resp:
            assert resp.status_code == 200, resp.read()[:500]
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                assert "error" not in chunk, chunk
                for choice in chunk.get("choices", ()):
                    more_ids, more_logprobs = _ids_and_logprobs(choice, chat)
                    ids += more_ids
                    logprobs += more_logprobs
                usage = chunk.get("usage") or usage
        return Output(ids, logprobs, *_usage(usage))


def _ids_and_logprobs(choice: dict[str, Any], chat: bool) -> tuple[list[int], list[float]]:
    lp = choice.get("logprobs") or {}
    values = [c["logprob"] for c in lp.get("content") or ()] if chat else list(lp.get("token_logprobs") or ())
    return list(choice.get("token_ids") or ()), values


def _usage(usage: dict[str, Any]) -> tuple[int, int]:
    return int(usage["prompt_tokens"]), int(usage["completion_tokens"])


@dataclass(frozen=True)
class Case:
    name: str
    prompt_tokens: int
    """English words (one token each); 0 for the Chinese chat."""
    stream: bool
    eager: bool
    """Through the router that disaggregates every uncached prompt (else the release's own)."""
    chat: bool = False


CASES = [
    Case("1 block", BLOCK, stream=False, eager=True),
    Case("1.5 blocks", 200, stream=True, eager=True),
    Case("3 blocks", 3 * BLOCK, stream=True, eager=True),
    Case("4 blocks", 4 * BLOCK, stream=False, eager=True),
    Case("2,600 tokens", 2600, stream=True, eager=False),
    Case("3,900 tokens", 3900, stream=False, eager=False),
    Case("Chinese chat", 0, stream=True, eager=False, chat=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_disaggregated_output_equals_aggregated_and_the_kv_arrives(
    case: Case, pd_release: Release, engines: Engines, eager_router: str
) -> None:
    once_more_on_transport_failure(lambda: _disaggregate_once(case, pd_release, engines, eager_router))


def _disaggregate_once(case: Case, pd_release: Release, engines: Engines, eager_router: str) -> None:
    router = eager_router if case.eager else pd_release.router_url
    seed = random.randrange(1 << 30)  # a prompt neither engine has cached, whatever ran before
    if case.chat:
        system = hanzi(1000, seed)
        body: dict[str, Any] = {"messages": [{"role": "system", "content": system},
                                             {"role": "user", "content": hanzi(20, seed + 1)}]}  # fmt: skip
    else:
        body = {"prompt": words(case.prompt_tokens, seed)}
    body = {"model": MODEL_NAME, "max_tokens": OUTPUT_TOKENS, **body}
    wait_routable(router, admin_headers(pd_release, router))
    decode0, prefill0, routed0 = counters(engines.decode), counters(engines.prefill), decisions(router)

    split = generate(router, body, chat=case.chat, stream=case.stream)
    n = split.prompt_tokens
    assert case.chat or n == case.prompt_tokens
    assert split.completion_tokens == OUTPUT_TOKENS and len(split.token_ids) == OUTPUT_TOKENS
    assert decisions(router).get("disaggregated", 0) == routed0.get("disaggregated", 0) + 1

    # The decode engine computed nothing: every prompt token arrived as KV, whole blocks of it.
    block_bytes = BLOCK * kv_bytes_per_token(engines.decode)

    def arrived(now: dict[str, float]) -> bool:
        return now[EXTERNAL_HITS] - decode0[EXTERNAL_HITS] >= n and now[NIXL_BYTES] > decode0[NIXL_BYTES]

    decode1 = until_kv(engines, decode0, arrived, f"the decode engine's {n} external tokens")
    delta = {k: decode1[k] - decode0[k] for k in COUNTERS}
    assert delta[EXTERNAL_HITS] == n and delta[LOCAL_HITS] == 0 and delta[NIXL_FAILED] == 0, delta
    assert delta[NIXL_BYTES] == math.ceil(n / BLOCK) * block_bytes, delta
    # The prefill engine computed the prompt (none of it from its cache).
    prefill1 = poll(
        lambda: counters(engines.prefill),
        lambda now: now[PROMPT_TOKENS] - prefill0[PROMPT_TOKENS] >= n,
        f"the prefill engine's {n} prompt tokens",
    )
    assert prefill1[PROMPT_TOKENS] - prefill0[PROMPT_TOKENS] == n
    assert prefill1[LOCAL_HITS] == prefill0[LOCAL_HITS]

    # The aggregated reference: the prefill engine alone, its cache salted so it computes the prompt afresh.
    alone = generate(engines.prefill, {**body, "cache_salt": f"ref-{seed}"}, chat=case.chat, stream=False)
    print(
        f"\n{case.name}: {n} prompt tokens, {delta[NIXL_BYTES] / 1024:.0f} KiB over NIXL, {split.token_ids}"
    )
    assert alone.prompt_tokens == n
    assert split.token_ids == alone.token_ids
    assert len(split.logprobs) == OUTPUT_TOKENS
    assert split.logprobs == pytest.approx(alone.logprobs, abs=LOGPROB_TOLERANCE)


def test_killing_the_prefill_engine_mid_run_fails_over_and_nothing_hangs(
    pd_release: Release, engines: Engines
) -> None:
    """Requests in flight when the prefill engine dies and requests sent after it: each ends within the guard
    and succeeds, the router retrying on the decode engine (which prefills for itself)."""
    router = pd_release.router_url
    status = pd_release.infctl("status", "--release", pd_release.name)
    victim = next(p for p in status["processes"] if p["url"] == engines.prefill)
    wait_routable(router, admin_headers(pd_release, router))
    routed0 = decisions(router)
    pending_at_kill: list[int] = []
    results: list[tuple[str, int, str]] = []
    # A prefill leg answered before the kill, its decode leg sent after (the router's window, sent by hand).
    orphan = {"model": MODEL_NAME, "prompt": words(600, 8999), "max_tokens": OUTPUT_TOKENS, "temperature": 0}
    with httpx.Client(timeout=300, trust_env=False) as client:
        leg = client.post(engines.prefill + "/v1/completions", json=vllm_pd.prefill_body(orphan))
    assert leg.status_code == 200, leg.text[:300]
    orphan_leg = vllm_pd.decode_body(orphan, leg.json(), pd_endpoint(engines.prefill))

    async def one(client: httpx.AsyncClient, i: int, when: str, stream: bool) -> None:
        body = {"model": MODEL_NAME, "prompt": words(1500, 9000 + i), "max_tokens": OUTPUT_TOKENS,
                "ignore_eos": True, "temperature": 0}  # fmt: skip
        if not stream:
            resp = await client.post(router + "/v1/completions", json=body)
            got = resp.json()["usage"]["completion_tokens"] if resp.status_code == 200 else resp.text[:200]
            results.append((when, resp.status_code, str(got)))
            return
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        got = "no usage"
        async with client.stream("POST", router + "/v1/completions", json=streamed) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    got = str(chunk["usage"]["completion_tokens"]) if chunk.get("usage") else got
                    got = f"error: {chunk['error']}" if "error" in chunk else got
        results.append((when, resp.status_code, got))

    async def run() -> None:
        async with httpx.AsyncClient(timeout=GUARD_S, trust_env=False) as client:
            before = [asyncio.create_task(one(client, i, "in flight", stream=False)) for i in range(6)]
            # Mid-run: once the first has come back, the rest are queued or in their legs.
            _, pending = await asyncio.wait(before, return_when=asyncio.FIRST_COMPLETED)
            os.killpg(victim["pid"], signal.SIGKILL)
            pending_at_kill.append(len(pending))
            after = [one(client, 100 + i, "after", stream=i % 2 == 1) for i in range(6)]
            await asyncio.gather(*before, *after)

    asyncio.run(asyncio.wait_for(run(), GUARD_S))
    routed = {k: v - routed0.get(k, 0) for k, v in decisions(router).items()}
    print(f"\nprefill killed with {pending_at_kill[0]} of 6 requests in flight; routing decisions meanwhile: "
          f"{routed}; results: {results}")  # fmt: skip
    assert len(results) == 12
    assert all(code == 200 and got == str(OUTPUT_TOKENS) for _, code, got in results), results
    # What the router retried: vLLM's decode cannot load the dead prefill's KV (kv_load_failure_policy
    # "fail"): 500 "Internal server error"; a stream, 200 and that error as its event (the simulator's model:
    # test_a_decode_cannot_load_the_kv_of_a_prefill_that_died_after_answering).
    with httpx.Client(timeout=300, trust_env=False) as client:
        lost = client.post(engines.decode + "/v1/completions", json=orphan_leg)
        lost_stream = client.post(engines.decode + "/v1/completions", json={**orphan_leg, "stream": True})
    print(f"decode leg after the kill: {lost.status_code} {lost.text[:200]}; stream {lost_stream.text[:300]}")
    assert lost.status_code == 500 and lost.json()["error"]["message"] == "Internal server error", lost.text
    events = [line[6:] for line in lost_stream.text.splitlines() if line.startswith("data: ")]
    assert lost_stream.status_code == 200 and events[-1] == "[DONE]", lost_stream.text[:500]
    assert json.loads(events[-2])["error"]["code"] == 500, lost_stream.text[:500]
    # Some went to the decode engine alone once the prefill was gone.
    assert sum(v for k, v in routed.items() if k != "disaggregated") >= 1, routed


def test_a_batch_is_split_into_a_pd_request_per_prompt_and_answered_as_one(
    pd_release: Release, engines: Engines, eager_router: str
) -> None:
    """vLLM answers a batch's prefill leg with the first prompt's ``kv_transfer_params`` only, so the router
    gives each prompt its own legs (``infctl.router.pd_batch``): one choice per prompt, usage their sum, and
    every prompt's KV arrives at the decode engine; the output equals the aggregated engine's batch."""
    once_more_on_transport_failure(lambda: _batch_once(engines, eager_router))


def _batch_once(engines: Engines, eager_router: str) -> None:
    seed = random.randrange(1 << 30)
    lengths = (BLOCK, 200, 3 * BLOCK)
    prompts = [words(n, seed + i) for i, n in enumerate(lengths)]
    body = {"model": MODEL_NAME, "prompt": prompts, "max_tokens": OUTPUT_TOKENS, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True}  # fmt: skip
    wait_routable(eager_router, {})
    decode0, routed0 = counters(engines.decode), decisions(eager_router)
    with httpx.Client(timeout=300, trust_env=False) as client:
        resp = client.post(eager_router + "/v1/completions", json=body)
        alone = client.post(engines.prefill + "/v1/completions", json={**body, "cache_salt": f"ref-{seed}"})
    assert resp.status_code == 200 and alone.status_code == 200, (resp.text[:500], alone.text[:500])
    split, ref = resp.json(), alone.json()
    assert [c["index"] for c in split["choices"]] == [0, 1, 2]
    assert [len(c["token_ids"]) for c in split["choices"]] == [OUTPUT_TOKENS] * 3
    assert split["usage"]["prompt_tokens"] == ref["usage"]["prompt_tokens"] == sum(lengths)
    assert split["usage"]["completion_tokens"] == ref["usage"]["completion_tokens"] == 3 * OUTPUT_TOKENS
    assert split["usage"]["total_tokens"] == sum(lengths) + 3 * OUTPUT_TOKENS
    assert [c["token_ids"] for c in split["choices"]] == [c["token_ids"] for c in ref["choices"]]
    assert decisions(eager_router).get("disaggregated", 0) == routed0.get("disaggregated", 0) + 1

    def arrived(now: dict[str, float]) -> bool:
        return now[EXTERNAL_HITS] - decode0[EXTERNAL_HITS] >= sum(lengths)

    decode1 = until_kv(engines, decode0, arrived, "every prompt's KV at the decode engine")
    delta = {k: decode1[k] - decode0[k] for k in COUNTERS}
    assert delta[EXTERNAL_HITS] == sum(lengths) and delta[LOCAL_HITS] == 0 and delta[NIXL_FAILED] == 0, delta
