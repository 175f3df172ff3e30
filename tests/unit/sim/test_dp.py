"""Data-parallel simulated engines: rank placement, one /metrics for all ranks, load reports, pins."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from infctl.engines import get_adapter
from infctl.errors import ConfigError
from infctl.router.ranks import Target, scrape_targets
from infctl.sim.dp import DPEngine, merge_expositions, pick_rank
from infctl.sim.personality.http_json import SimHTTPError
from infctl.sim.server import SimCluster
from infctl.sim.settings import SimSettings
from infctl.telemetry.prometheus import parse_metrics
from tests.conftest import parse_exposition

RANK = """\
# HELP c_total Things.
# TYPE c_total counter
c_total{{m="x"}} {shared}
# HELP g Per rank.
# TYPE g gauge
g{{m="x",r="{rank}"}} {own}
"""


def test_merge_keeps_each_ranks_series_and_adds_up_shared_ones() -> None:
    merged = merge_expositions([RANK.format(shared=2, rank=0, own=5), RANK.format(shared=3, rank=1, own=7)])
    lines = merged.splitlines()
    assert lines.count("# TYPE g gauge") == 1 and lines.count("# HELP c_total Things.") == 1
    assert parse_exposition(merged) == {'c_total{m="x"}': 5.0, 'g{m="x",r="0"}': 5.0, 'g{m="x",r="1"}': 7.0}
    # each family's samples follow its own header
    assert lines.index('g{m="x",r="1"} 7.0') == lines.index("# TYPE g gauge") + 2


def test_least_loaded_is_vllms_score_and_round_robin_cycles() -> None:
    assert pick_rank("least_loaded", [(1, 0), (0, 3)], 0) == 1  # 4 * 1 > 3
    assert pick_rank("least_loaded", [(0, 5), (1, 0)], 0) == 1
    assert pick_rank("least_loaded", [(0, 2), (0, 2)], 7) == 0  # ties: lowest rank
    assert [pick_rank("round_robin", [(9, 9), (0, 0), (0, 0)], t) for t in range(4)] == [0, 1, 2, 0]


@contextlib.asynccontextmanager
async def dp(personality: str, ranks: int = 2, **settings: Any) -> AsyncIterator[DPEngine]:
    cfg = SimSettings(personality=personality, port=0, time_scale=0.01, data_parallel_size=ranks,  # type: ignore[arg-type]
                      **settings)  # fmt: skip
    cluster = SimCluster(cfg)
    await cluster.start()
    try:
        engine = cluster.instances[0]
        assert isinstance(engine, DPEngine)
        yield engine
    finally:
        await cluster.close()


def finished(engine: DPEngine) -> list[int]:
    return [sum(r.metrics.finished.values()) for r in engine.ranks]


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_a_pinned_request_runs_on_its_rank_and_metrics_say_so(personality: str) -> None:
    adapter = get_adapter(personality)
    pin = adapter.pin_rank(1)
    async with dp(personality) as engine, httpx.AsyncClient(timeout=10) as client:
        for i in range(3):
            body = {"prompt": f"hello {i}", "max_tokens": 2, **pin.body}
            resp = await client.post(f"{engine.url}/v1/completions", json=body, headers=dict(pin.headers))
            assert resp.status_code == 200
        assert finished(engine) == [0, 3]
        text = (await client.get(f"{engine.url}/metrics")).text
        by_rank = await scrape_targets(client, [Target(f"e#dp{r}", engine.url, r, adapter) for r in (0, 1)])
    signals = {}
    for r in (0, 1):
        families = parse_metrics(text, adapter.wanted_metrics)
        per_rank = {
            name: [s for s in samples if s.labels.get(adapter.dp_rank_label, str(r)) == str(r)]
            for name, samples in families.items()
        }
        signals[r] = adapter.signals(per_rank)
    assert signals[1].prompt_tokens == 6  # two words per prompt, all on rank 1
    # The router's per-rank reading gives each rank its own pool, the engine's reading both once.
    rank = engine.ranks[0].capacity
    pool = rank.num_gpu_blocks * rank.block_size
    assert adapter.signals(parse_metrics(text, adapter.wanted_metrics)).cache_capacity_tokens == 2 * pool
    assert [getattr(s, "cache_capacity_tokens", s) for s in by_rank.values()] == [pool, pool]


async def test_vllm_writes_the_engines_pool_on_every_ranks_cache_config_info() -> None:
    """vLLM 0.32 sums num_gpu_blocks over the engine cores (v1/engine/core_client.py:851-855) and writes it on
    each one's sample (v1/metrics/loggers.py:1133-1136)."""
    async with dp("vllm", ranks=3) as engine, httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(f"{engine.url}/metrics")).text
    info = parse_metrics(text, {"vllm:cache_config_info"})["vllm:cache_config_info"]
    total = str(3 * engine.ranks[0].capacity.num_gpu_blocks)
    assert sorted((s.labels["engine"], s.labels["num_gpu_blocks"]) for s in info) == [
        ("0", total),
        ("1", total),
        ("2", total),
    ]


async def test_sglang_pins_by_the_header_then_the_body_as_the_pinned_release_does() -> None:
    """0.5.15 (srt/entrypoints/openai/serving_base.py extract_routed_dp_rank_from_header, protocol.py
    _migrate_deprecated_dp_rank): X-Data-Parallel-Rank wins over routed_dp_rank, which wins over
    data_parallel_rank. The simulator read data_parallel_rank alone."""
    async with dp("sglang") as engine, httpx.AsyncClient(timeout=10) as client:
        url = f"{engine.url}/v1/completions"
        for i in range(2):
            body = {"prompt": f"x {i}", "max_tokens": 1, "data_parallel_rank": 0}
            ok = await client.post(url, json=body, headers={"X-Data-Parallel-Rank": "1"})
            assert ok.status_code == 200
        assert finished(engine) == [0, 2]  # the header, not round robin nor the body
        body = {"prompt": "x", "max_tokens": 1, "routed_dp_rank": 0, "data_parallel_rank": 1}
        assert (await client.post(url, json=body)).status_code == 200
        assert finished(engine) == [1, 2]
        bad = await client.post(url, json={"prompt": "x"}, headers={"x-data-parallel-rank": "one"})
        assert bad.status_code == 400 and finished(engine) == [1, 2]
        error = bad.json()
        assert error["message"] == "Invalid X-Data-Parallel-Rank header: must be an integer, got 'one'"
        assert error["type"] == "400" and error["code"] == 400


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_a_rank_outside_the_engine_is_a_400(personality: str) -> None:
    pin = get_adapter(personality).pin_rank(2)
    async with dp(personality) as engine, httpx.AsyncClient(timeout=10) as client:
        resp = await client.post(
            f"{engine.url}/v1/completions", json={"prompt": "x", **pin.body}, headers=dict(pin.headers)
        )
    assert resp.status_code == 400
    assert "out of range [0, 2)" in resp.text


async def test_sglang_load_endpoints_list_every_rank() -> None:
    async with dp("sglang", ranks=3) as engine, httpx.AsyncClient(timeout=10) as client:
        report = get_adapter("sglang").parse_load((await client.get(f"{engine.url}/v1/loads")).json())
        legacy = (await client.get(f"{engine.url}/get_load")).json()
        info = (await client.get(f"{engine.url}/get_model_info")).status_code  # single-rank routes remain
    assert [r.dp_rank for r in report.ranks] == [0, 1, 2]
    assert [entry["dp_rank"] for entry in legacy] == [0, 1, 2]
    assert info == 200


async def test_vllm_places_unpinned_requests_on_the_least_loaded_rank() -> None:
    async with dp("vllm") as engine, httpx.AsyncClient(timeout=10) as client:
        engine.ranks[0].server_load = 3  # three requests accepted by rank 0, none running yet
        await client.post(f"{engine.url}/v1/completions", json={"prompt": "x", "max_tokens": 1})
        engine.ranks[0].server_load = 0
        assert finished(engine) == [0, 1]
        assert (await client.get(f"{engine.url}/load")).json() == {"server_load": 0}


async def test_faults_apply_to_every_rank() -> None:
    async with dp("vllm") as engine, httpx.AsyncClient(timeout=10) as client:
        await client.post(f"{engine.url}/admin/faults", json={"error_rate": 1.0, "error_status": 503})
        url, pin = f"{engine.url}/v1/completions", dict(get_adapter("vllm").pin_rank(1).headers)
        resp = await client.post(url, json={"prompt": "x"}, headers=pin)
        assert resp.status_code == 503
        await client.delete(f"{engine.url}/admin/faults")
        resp = await client.post(url, json={"prompt": "x"}, headers=pin)
        assert resp.status_code == 200


async def test_vllm_pd_roles_are_refused_with_data_parallel_ranks() -> None:
    # KV events are published per rank (test_dp_kv_events.py); vLLM's PD roles are not modelled yet, SGLang's
    # are (a prefill follows the room: test_sglang_dp_prefill_serves_each_room_on_its_rank).
    with pytest.raises(ConfigError, match="PD roles"):
        SimCluster(SimSettings(port=0, roles=("prefill",), data_parallel_size=2))
    with pytest.raises(ConfigError, match="at least 1"):
        SimCluster(SimSettings(port=0, data_parallel_size=0))


async def test_sglang_dp_prefill_serves_each_room_on_its_rank(start_sim: Any) -> None:
    sim = await start_sim(personality="sglang", roles=("prefill",), data_parallel_size=3)
    engine = sim.instances[0]
    assert isinstance(engine, DPEngine)
    url = f"{engine.url}/v1/completions"
    async with httpx.AsyncClient(timeout=10) as client:
        info = (await client.get(f"{engine.url}/server_info")).json()
        follows = [await client.post(url, json={"prompt": "a b", "bootstrap_room": room}) for room in (4, 8)]
        pinned = await client.post(url, json={"prompt": "a b", "bootstrap_room": 7, "routed_dp_rank": 1})
        wrong = await client.post(url, json={"prompt": "a b", "bootstrap_room": 7, "routed_dp_rank": 2})
    assert (info["dp_size"], info["enable_dp_attention"], info["load_balance_method"]) == (
        3,
        False,
        "follow_bootstrap_room",
    )
    assert [r.status_code for r in (*follows, pinned)] == [200, 200, 200]
    # A prefill leg generates one token: rooms 4 and 7 ran on rank 1, 8 on rank 2, none on rank 0.
    assert [r.stats().generation_tokens for r in engine.ranks] == [0, 2, 1]
    assert wrong.status_code == 500 and "follow_bootstrap_room conflict" in wrong.json()["message"]


def test_malformed_pins() -> None:
    from infctl.sim.personality.sglang import SglangPersonality
    from infctl.sim.personality.vllm import VllmPersonality

    assert VllmPersonality.pinned_rank(None, {"x-data-parallel-rank": "abc"}, {}) is None  # type: ignore[arg-type]
    with pytest.raises(SimHTTPError):
        SglangPersonality.pinned_rank(None, {}, {"data_parallel_rank": True})  # type: ignore[arg-type]


async def test_two_instances_keep_their_own_request_counters(scrape: Any) -> None:
    """Regression check for a report that ``--instances 2`` share request_success_total: they do not."""
    cluster = SimCluster(SimSettings(port=0, instances=2, time_scale=0.01))
    await cluster.start()
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(3):
                await client.post(f"{cluster.urls[1]}/v1/completions", json={"prompt": "x", "max_tokens": 1})
        counts = [await scrape(u) for u in cluster.urls]
    finally:
        await cluster.close()
    key = next(k for k in counts[1] if k.startswith("vllm:request_success_total") and "length" in k)
    assert [c[key] for c in counts] == [0.0, 3.0]


async def test_serve_builds_the_ranks_the_settings_ask_for_and_sglang_reports_them(start_sim: Any) -> None:
    single, double = (
        await start_sim(personality="sglang"),
        await start_sim(personality="sglang", data_parallel_size=2),
    )
    engine = double.instances[0]
    assert isinstance(engine, DPEngine) and len(engine.ranks) == 2
    async with httpx.AsyncClient(timeout=10) as client:
        infos = [(await client.get(f"{c.urls[0]}/get_server_info")).json() for c in (single, double)]
        loads = (await client.get(f"{double.urls[0]}/v1/loads")).json()
    assert [info["dp_size"] for info in infos] == [1, 2]
    assert [entry["dp_rank"] for entry in loads["loads"]] == [0, 1]


def test_cli_data_parallel_size_is_taught_and_checked() -> None:
    from typer.testing import CliRunner

    from infctl.cli.main import _register, app

    _register()
    runner = CliRunner()
    refused = runner.invoke(app, ["sim", "--data-parallel-size", "0"])
    assert refused.exit_code == 2 and "--data-parallel-size" in refused.output
    helped = runner.invoke(app, ["sim", "--help"], env={"COLUMNS": "200"})
    assert "--data-parallel-size" in helped.output and "SGLang --dp-size" in helped.output


@pytest.mark.slow  # a subprocess: the interpreter and infctl's imports take seconds on a loaded machine
async def test_cli_data_parallel_size_serves_per_rank_metrics() -> None:
    import os
    import signal
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infctl", "sim", "--port", "0", "--data-parallel-size", "2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert "2 DP ranks" in line, line
        url = line.split("ready: ")[1].split()[0]
        async with httpx.AsyncClient(timeout=10) as client:
            pin = get_adapter("vllm").pin_rank(1)
            body = {"prompt": "hi", "max_tokens": 2, **pin.body}
            resp = await client.post(f"{url}/v1/completions", json=body, headers=dict(pin.headers))
            assert resp.status_code == 200
            text = (await client.get(f"{url}/metrics")).text
        label = get_adapter("vllm").dp_rank_label
        finished = {
            s.labels[label]: s.value
            for s in parse_metrics(text, {"vllm:request_success_total"})["vllm:request_success_total"]
            if s.labels.get("finished_reason") == "length"
        }
        assert finished == {"0": 0.0, "1": 1.0}  # one series per rank; the pinned request ran on rank 1
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
