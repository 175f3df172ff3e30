"""The precise prefix index fed by a real vLLM's KV events: the router re-hashes the events' token ids into
its own blocks, so the cached prefix it predicts for each request is the one vLLM then reports."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import MODEL_NAME, Release, deployed, engine_command, hanzi, tiny_vllm_model

from infctl.tokens import _WORDS

pytestmark = pytest.mark.slow
VLLM_BLOCK = 128
"""vLLM's KV block on the CPU platform, tokens."""


@pytest.fixture(scope="module")
def kv_release(vllm_python: str, tiny_model: Path) -> Iterator[Release]:
    """Two real vLLMs publishing KV events, behind the router."""
    model = tiny_vllm_model(tiny_model, kv_events={})
    profile = {
        "name": "e2e-vllm-kv",
        "target": "local",
        "mode": "aggregated",
        "replicas": 2,
        "model": model,
        "router": {"enabled": True, "policy": "cache_aware", "settings": {}},
        "local": {
            "simulate": False,
            "engine_command": publish_on_own_port(engine_command(vllm_python, model)),
        },
    }
    with deployed(profile) as release:
        yield release


def publish_on_own_port(argv: list[str]) -> list[str]:
    """The adapter's command publishes on the profile's port; the local target gives each engine its own."""
    return [w.replace("tcp://*:5557", "tcp://*:{kv_events_port}") for w in argv]


def router_counter(release: Release, name: str) -> float:
    text = httpx.get(release.router_url + "/metrics", timeout=10, trust_env=False).text
    return sum(float(x.rpartition(" ")[2]) for x in text.splitlines() if x.startswith(name + " "))


def english(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def test_predicted_cached_prefix_matches_vllms_cached_tokens(kv_release: Release) -> None:
    token = Path(kv_release.summary["admin_token"]["file"]).read_text().strip()
    policy = {"preset": "cache_aware", "index": "precise"}
    rng = random.Random(5)
    prefixes = [
        hanzi(rng.randint(150, 700), seed=p) if p % 2 else english(rng.randint(150, 700), p) for p in range(8)
    ]
    misses: list[str] = []
    n = 0
    with httpx.Client(timeout=120, trust_env=False) as client:
        resp = client.put(
            kv_release.router_url + "/admin/policy", json=policy, headers={"authorization": f"Bearer {token}"}
        )
        assert resp.status_code == 200, resp.text
        for i in range(60):
            prefix = prefixes[rng.randrange(len(prefixes))]
            messages = [{"role": "system", "content": prefix}, {"role": "user", "content": hanzi(8, 900 + i)}]
            before = router_counter(kv_release, "infctl_router_estimated_cached_tokens_total")
            body = {"model": MODEL_NAME, "messages": messages, "max_tokens": 1}
            resp = client.post(kv_release.router_url + "/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            predicted = router_counter(kv_release, "infctl_router_estimated_cached_tokens_total") - before
            cached = resp.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
            n += 1
            if abs(predicted - cached) >= VLLM_BLOCK:
                misses.append(f"request {i}: router predicted {predicted:.0f}, vLLM cached {cached}")
        kv = client.get(kv_release.router_url + "/metrics").text
    batches = [x for x in kv.splitlines() if x.startswith("infctl_router_kv_event_batches_total")]
    print(
        f"\nprecise index on real KV events: {n - len(misses)} of {n} predictions within one block; {batches}"
    )
    assert len(misses) <= 0.05 * n, misses


def prefix_counters(release: Release) -> tuple[float, float]:
    queries = hits = 0.0
    for url in release.engine_urls:
        text = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
        for line in text.splitlines():
            if line.startswith("vllm:prefix_cache_queries_total"):
                queries += float(line.rpartition(" ")[2])
            elif line.startswith("vllm:prefix_cache_hits_total"):
                hits += float(line.rpartition(" ")[2])
    return queries, hits


def hit_ratio(release: Release, index: str, seed: int) -> float:
    """Six Chinese and English system prompts, three questions each in a row, on cache_aware with
    ``index``; vLLM's own hits/queries over the run."""
    token = Path(release.summary["admin_token"]["file"]).read_text().strip()
    policy = {"preset": "cache_aware", "index": index}
    with httpx.Client(timeout=120, trust_env=False) as client:
        resp = client.put(
            release.router_url + "/admin/policy", json=policy, headers={"authorization": f"Bearer {token}"}
        )
        assert resp.status_code == 200, resp.text
        q0, h0 = prefix_counters(release)
        for p in range(6):
            system = hanzi(900, seed * 100 + p) if p % 2 else english(900, seed * 100 + p)
            for turn in range(3):
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": hanzi(10, seed * 1000 + p * 10 + turn)},
                ]
                body = {"model": MODEL_NAME, "messages": messages, "max_tokens": 2, "ignore_eos": True}
                assert client.post(release.router_url + "/v1/chat/completions", json=body).status_code == 200
        q1, h1 = prefix_counters(release)
    return (h1 - h0) / (q1 - q0)


def test_the_precise_index_hits_no_less_than_the_approximate_one(kv_release: Release) -> None:
    approx = hit_ratio(kv_release, "approx", seed=41)
    precise = hit_ratio(kv_release, "precise", seed=42)
    print(
        f"\nvLLM prefix_cache_hits/queries on cache_aware: approx index {approx:.3f}, precise {precise:.3f}"
    )
    assert precise >= approx - 0.02  # the same routing when both know the same blocks; noise: 0.02
