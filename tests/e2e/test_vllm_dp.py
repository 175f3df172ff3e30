"""Two data-parallel vLLM CPU engines (2 ranks each) side by side behind the router, by ``infctl deploy
--target local``: both come up (each with its own ``--data-parallel-rpc-port``, infctl/local/engine_ports.py),
each rank answers a request pinned to it, and the router sends requests to all four ranks, each landing on the
rank it names.

Slow (the four engine cores start in ~2-4 minutes on two cores); run with ``python -m pytest -m slow
tests/e2e/test_vllm_dp.py``. Uses conftest.py's ``vllm_python`` and ``tiny_model``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import ENGINE_ENV, MODEL_NAME, Release, deployed, engine_command

from infctl.engines import vllm as v
from infctl.local.deploy import read_plan
from infctl.local.state import PLAN_FILE
from infctl.telemetry.prometheus import parse_metrics

pytestmark = pytest.mark.slow
RANKS = 2
RANK_HEADER = "X-data-parallel-rank"
ROUTED = 8
"""Requests sent through the router (round robin over 4 ranks: 2 each when none is skipped)."""
POLL_S = 120.0
"""How long a counter may take to show a finished request (a loaded machine delays /metrics)."""


@pytest.fixture(scope="module")
def dp_release(vllm_python: str, tiny_model: Path) -> Iterator[Release]:
    model: dict[str, Any] = {
        "engine": "vllm",
        "model": str(tiny_model),
        "served_model_name": MODEL_NAME,
        "max_model_len": 1024,
        "enable_prefix_caching": True,
        "data_parallel_size": RANKS,
        "env": ENGINE_ENV,
        # No torch.compile: four engine cores compiling at once on two cores would add a minute to the start.
        "extra_args": ["--enforce-eager"],
    }
    # The adapter's command run by the vLLM venv, plus the placeholder of the port the plan holds for each
    # engine's data-parallel handshake (it adds the flag itself when it runs the adapter's command).
    command = [*engine_command(vllm_python, model), "--data-parallel-rpc-port", "{dp_rpc_port}"]
    profile = {
        "name": "e2e-vllm-dp",
        "target": "local",
        "mode": "aggregated",
        "replicas": 2,
        "model": model,
        "router": {"enabled": True, "policy": "round_robin"},
        "local": {"simulate": False, "engine_command": command},
    }
    with deployed(profile) as release:
        yield release


def completion(url: str, seed: int, headers: dict[str, str] | None = None) -> None:
    body = {
        "model": MODEL_NAME,
        "prompt": f"request {seed} of the data parallel test",
        "max_tokens": 4,
        "temperature": 0,
        "ignore_eos": True,
    }
    resp = httpx.post(url + "/v1/completions", json=body, headers=headers, timeout=120, trust_env=False)
    assert resp.status_code == 200, resp.text
    assert resp.json()["usage"]["completion_tokens"] == 4


def finished_by_rank(engine_url: str) -> dict[str, float]:
    """vLLM's finished requests per data-parallel rank (its ``engine`` label), from the engine's /metrics."""
    text = httpx.get(engine_url + "/metrics", timeout=60, trust_env=False).text
    out: dict[str, float] = {}
    for s in parse_metrics(text, [v.REQUEST_SUCCESS]).get(v.REQUEST_SUCCESS, []):
        out[s.labels[v.ENGINE_LABEL]] = out.get(s.labels[v.ENGINE_LABEL], 0.0) + s.value
    return out


def routed_by_backend(router_url: str) -> dict[str, float]:
    """The router's successful requests per backend id (``URL#dpN`` for a rank)."""
    text = httpx.get(router_url + "/metrics", timeout=30, trust_env=False).text
    samples = parse_metrics(text, ["infctl_router_requests_total"]).get("infctl_router_requests_total", [])
    return {s.labels["backend"]: s.value for s in samples if s.labels["status"] == "2xx"}


def poll(read: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    deadline = time.monotonic() + POLL_S
    while True:
        seen = read()
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {seen} after {POLL_S:.0f} s")
        time.sleep(1.0)


def test_each_engine_holds_its_own_rpc_port_and_serves_every_rank(dp_release: Release) -> None:
    plan, _ = read_plan(dp_release.run_dir / dp_release.name / PLAN_FILE)
    engines = [s for s in plan.specs if s.kind == "engine"]
    assert [s.url for s in engines] == list(dp_release.engine_urls) and len(engines) == 2
    rpc = [s.argv[s.argv.index("--data-parallel-rpc-port") + 1] for s in engines]
    assert rpc == [str(s.ports["dp_rpc"]) for s in engines] and len(set(rpc)) == 2
    for url in dp_release.engine_urls:
        before = finished_by_rank(url)
        for rank in range(RANKS):
            completion(url, seed=rank, headers={RANK_HEADER: str(rank)})
        want = {str(r): before.get(str(r), 0.0) + 1 for r in range(RANKS)}
        poll(lambda u=url: finished_by_rank(u), lambda seen, w=want: seen == w, f"{url} ranks' finished")


def test_the_router_routes_to_all_four_ranks_each_on_its_own_rank(dp_release: Release) -> None:
    before = {url: finished_by_rank(url) for url in dp_release.engine_urls}
    routed_before = routed_by_backend(dp_release.router_url)
    for i in range(ROUTED):
        completion(dp_release.router_url, seed=100 + i)
    ids = [f"{url}#dp{r}" for url in dp_release.engine_urls for r in range(RANKS)]
    routed = poll(
        lambda: routed_by_backend(dp_release.router_url),
        lambda seen: sum(seen.values()) - sum(routed_before.values()) >= ROUTED,
        "router's 2xx count",
    )
    sent = {b: routed.get(b, 0.0) - routed_before.get(b, 0.0) for b in ids}
    assert sum(sent.values()) == ROUTED and all(n >= 1 for n in sent.values()), sent
    # Each rank finished exactly what the router sent its backend: the router's rank header pinned it there.
    for url in dp_release.engine_urls:
        want = {str(r): before[url].get(str(r), 0.0) + sent[f"{url}#dp{r}"] for r in range(RANKS)}
        poll(lambda u=url: finished_by_rank(u), lambda seen, w=want: seen == w, f"{url} ranks after routing")
