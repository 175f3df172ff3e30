"""Signals over HTTP, against httpx.MockTransport: engine scrapes, the router's /metrics and admin list,
and Prometheus instant queries."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from infctl.autoscaler.fleet import ReplicaInfo
from infctl.autoscaler.promql import PrometheusSource, query_signals
from infctl.autoscaler.signals import read_router, router_backends, scrape_replicas, window_quantile
from infctl.engines import get_adapter
from infctl.errors import MetricsError
from infctl.telemetry import make_client

VLLM = get_adapter("vllm")


def vllm_metrics(waiting: float, running: float, kv: float) -> str:
    return (
        f'vllm:num_requests_waiting{{model_name="m"}} {waiting}\n'
        f'vllm:num_requests_running{{model_name="m"}} {running}\n'
        f'vllm:kv_cache_usage_perc{{model_name="m"}} {kv}\n'
    )


def router_metrics(queue: float, buckets: dict[str, int]) -> str:
    lines = [f"infctl_router_queue_depth {queue}"]
    lines += [
        f'infctl_router_time_to_first_byte_seconds_bucket{{le="{le}"}} {n}' for le, n in buckets.items()
    ]
    return "\n".join(lines) + "\n"


def client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    return make_client(httpx.MockTransport(handler))


async def test_ready_replicas_are_scraped_and_failures_left_out() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.port == 1:
            return httpx.Response(200, text=vllm_metrics(12, 4, 0.5))
        return httpx.Response(500, text="boom")

    replicas = [
        ReplicaInfo("a", "http://e:1", "both"),
        ReplicaInfo("b", "http://e:2", "both"),
        ReplicaInfo("c", "http://e:3", "decode", "g0", ready=False),
    ]
    async with client(handler) as c:
        got, errors = await scrape_replicas(c, replicas, VLLM)
    by_name = {r.name: r for r in got}
    assert (by_name["a"].queue, by_name["a"].running, by_name["a"].kv_usage) == (12, 4, 0.5)
    assert "b" not in by_name and len(errors) == 1 and "500" in errors[0].message
    assert by_name["c"].ready is False and by_name["c"].group == "g0"


async def test_router_ttft_p99_is_over_the_last_window_only() -> None:
    readings = iter(
        [
            router_metrics(3, {"0.1": 100, "1.0": 100, "+Inf": 100}),
            router_metrics(5, {"0.1": 100, "1.0": 100, "+Inf": 200}),  # the next 100 all took over 1 s
        ]
    )
    async with client(lambda req: httpx.Response(200, text=next(readings))) as c:
        first = await read_router(c, "http://router:8000", None)
        second = await read_router(c, "http://router:8000", first.buckets)
    assert (first.queue, first.ttft_p99_s) == (3, None)
    assert second.queue == 5 and second.ttft_p99_s == 1.0  # the +Inf bucket reports the highest bound


def test_window_quantile_interpolates_and_survives_a_router_restart() -> None:
    before = ((0.5, 10.0), (1.0, 10.0), (float("inf"), 10.0))
    after = ((0.5, 10.0), (1.0, 110.0), (float("inf"), 110.0))
    assert window_quantile(0.5, before, after) == pytest.approx(0.75)
    restarted = ((0.5, 4.0), (1.0, 4.0), (float("inf"), 4.0))
    assert window_quantile(0.5, before, restarted) == pytest.approx(0.25)
    assert window_quantile(0.99, before, before) is None


async def test_router_admin_list_as_signals() -> None:
    backends = [
        {"id": "http://a", "role": "prefill", "group": "g0", "queue": 3, "running": 2, "kv_usage": 0.4},
        {
            "id": "http://b",
            "role": "decode",
            "group": "g0",
            "queue": 1,
            "running": 8,
            "kv_usage": 0.9,
            "draining": True,
        },
    ]

    def handler(req: httpx.Request) -> httpx.Response:
        assert req.headers["authorization"] == "Bearer t0k"
        return httpx.Response(200, json={"backends": backends})

    async with client(handler) as c:
        a, b = await router_backends(c, "http://router", token="t0k")
    assert (a.role, a.group, a.ready, a.queue, a.kv_usage) == ("prefill", "g0", True, 3, 0.4)
    assert b.ready is False


async def test_prometheus_instant_query_groups_series_by_pod() -> None:
    def series(name: str, pod: str, role: str, v: float) -> dict[str, object]:
        return {"metric": {"__name__": name, "pod": pod, "infctl_io_role": role}, "value": [1.7e9, str(v)]}

    result = [
        series("vllm:num_requests_waiting", "p-0", "prefill", 9),
        series("vllm:kv_cache_usage_perc", "p-0", "prefill", 0.3),
        series("vllm:num_requests_waiting", "d-0", "decode", 1),
        series("vllm:num_requests_running", "d-0", "decode", 30),
    ]
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/api/v1/query"
        seen.append(req.url.params["query"])
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    source = PrometheusSource("http://prom:9090", {"namespace": "inference"})
    async with client(handler) as c:
        d, p = await query_signals(c, source, VLLM)
    assert (p.name, p.role, p.queue, p.kv_usage) == ("p-0", "prefill", 9, 0.3)
    assert (d.name, d.role, d.queue, d.running) == ("d-0", "decode", 1, 30)
    assert 'namespace="inference"' in seen[0] and "vllm:num_requests_waiting" in seen[0]


async def test_prometheus_errors_name_the_url() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "error": "parse error at char 3"})

    async with client(handler) as c:
        with pytest.raises(MetricsError, match="prom:9090/api/v1/query answered HTTP 400: parse error"):
            await query_signals(c, PrometheusSource("http://prom:9090"), VLLM)
    async with client(lambda req: httpx.Response(200, text="<html>")) as c:
        with pytest.raises(MetricsError, match="non-JSON"):
            await query_signals(c, PrometheusSource("http://prom:9090"), VLLM)
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})
    async with client(lambda req: httpx.Response(200, text=body)) as c:
        with pytest.raises(MetricsError, match="expected a vector"):
            await query_signals(c, PrometheusSource("http://prom:9090"), VLLM)


def test_demand_is_the_rate_of_the_routers_counters() -> None:
    from infctl.autoscaler.signals import demand_between

    got = demand_between((10, 1000, 200), (40, 31_000, 1200), 15.0)
    assert got is not None and got.requests_per_s == 2.0 and got.prompt_tps == 1933.3333333333333
    assert demand_between((10, 1000, 200), (5, 500, 100), 15.0) is None  # the router restarted
    assert demand_between((10, 1000, 200), (10, 1000, 200), 0.0) is None


async def test_the_routers_queue_per_pool_is_read_for_scale_to_zero() -> None:
    text = (
        router_metrics(3, {"+Inf": 0})
        + 'infctl_router_pool_queue_depth{pool="short"} 2.0\n'
        + 'infctl_router_pool_queue_depth{pool="long"} 1.0\n'
    )
    async with client(lambda req: httpx.Response(200, text=text)) as c:
        reading = await read_router(c, "http://router:8000", None)
    assert reading.queue == 3 and dict(reading.pool_queue) == {"short": 2.0, "long": 1.0}
