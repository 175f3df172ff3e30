"""Gate metrics (router /metrics deltas, PromQL) and the router backend, over an httpx MockTransport."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from infctl.cutover import (
    CutoverError,
    PrometheusGateSource,
    RouterBackend,
    RouterMetricsSource,
    StaleStateError,
)
from infctl.cutover.window import window_stats
from infctl.telemetry.prometheus import parse_metrics
from infctl.telemetry.scrape import make_client


def exposition(counts: dict[tuple[str, str], int], buckets: dict[str, dict[str, int]]) -> str:
    lines = [f'infctl_router_upstream_requests_total{{upstream="{u}",status="{s}"}} {n}'
             for (u, s), n in counts.items()]  # fmt: skip
    for u, bs in buckets.items():
        lines += [f'infctl_router_upstream_time_to_first_byte_seconds_bucket{{upstream="{u}",le="{le}"}} {n}'
                  for le, n in bs.items()]  # fmt: skip
    return "\n".join(lines) + "\n"


BEFORE = exposition({("new", "2xx"): 10, ("old", "2xx"): 90}, {"new": {"0.1": 10, "1.0": 10, "+Inf": 10}})
AFTER = exposition(
    {("new", "2xx"): 90, ("new", "5xx"): 15, ("new", "failed"): 5, ("new", "4xx"): 10, ("old", "2xx"): 500},
    {"new": {"0.1": 20, "1.0": 100, "+Inf": 100}},
)


def test_window_stats_diff_counters_and_buckets() -> None:
    s = window_stats(parse_metrics(BEFORE), parse_metrics(AFTER), "new")
    assert (s.requests, s.errors, s.throttled) == (110, 20, 10)
    assert s.metric("error_rate") == pytest.approx(20 / 110)
    # 90 new observations: 10 at <=0.1 s, 80 in (0.1, 1.0]
    assert s.ttft_s[0.5] == pytest.approx(0.1 + 0.9 * (45 - 10) / 80)
    old = window_stats(parse_metrics(BEFORE), parse_metrics(AFTER), "old")
    assert old.requests == 410 and old.ttft_s[0.99] is None


def test_a_router_restart_counts_from_zero() -> None:
    restarted = exposition({("new", "2xx"): 3}, {})
    assert window_stats(parse_metrics(BEFORE), parse_metrics(restarted), "new").requests == 3


async def test_router_source_scrapes_at_both_ends_of_the_window() -> None:
    pages = iter([BEFORE, AFTER])
    transport = httpx.MockTransport(lambda r: httpx.Response(200, text=next(pages)))
    async with make_client(transport) as client:
        source = RouterMetricsSource(client, "http://router:8000", ("old", "new"))
        await source.start()
        stats = await source.measure(60)
    assert stats["new"].requests == 110 and stats["old"].requests == 410


async def test_prometheus_source_queries_increase_and_histogram_quantile() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        q = request.url.params["query"]
        seen.append(q)
        if q.startswith("sum by (upstream, status)"):
            result = [{"metric": {"upstream": "new", "status": "2xx"}, "value": [0, "95"]},
                      {"metric": {"upstream": "new", "status": "5xx"}, "value": [0, "5"]},
                      {"metric": {"upstream": "old", "status": "2xx"}, "value": [0, "900"]}]  # fmt: skip
        else:
            value = "NaN" if "0.5," in q else "1.25"
            result = [{"metric": {"upstream": "new"}, "value": [0, value]}]
        data = {"resultType": "vector", "result": result}
        return httpx.Response(200, json={"status": "success", "data": data})

    async with make_client(httpx.MockTransport(answer)) as client:
        source = PrometheusGateSource(client, "http://prom:9090", ("old", "new"), 'namespace="inference"')
        await source.start()
        stats = await source.measure(600)
    assert seen[0] == (
        "sum by (upstream, status) (increase(infctl_router_upstream_requests_total"
        '{upstream=~"old|new",namespace="inference"}[600s]))'
    )
    assert seen[-1] == (
        "histogram_quantile(0.99, sum by (le, upstream) (rate(infctl_router_upstream_time_to_first_byte_"
        'seconds_bucket{upstream=~"old|new",namespace="inference"}[600s])))'
    )
    new = stats["new"]
    assert (new.requests, new.errors) == (100, 5) and new.ttft_s == {0.5: None, 0.9: 1.25, 0.99: 1.25}
    assert stats["old"].requests == 900 and stats["old"].ttft_s[0.99] is None


async def test_prometheus_errors_name_the_query() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(400, json={"status": "error", "error": "bad"}))
    async with make_client(transport) as client:
        source = PrometheusGateSource(client, "http://prom:9090", ("old", "new"))
        with pytest.raises(Exception, match="refused 'sum by"):
            await source.measure(60)


class FakeAdmin:
    """The router's /admin/upstreams contract: version, ETag, If-Match -> 412."""

    def __init__(self, token: str | None = None) -> None:
        self.view: dict[str, Any] = {
            "weights": {"old": 100, "new": 0}, "mirror": {"to": "shadow", "percent": 5},
            "annotations": {"team": "infra"}, "version": 3,
        }  # fmt: skip
        self.token = token
        self.puts: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.token and request.headers.get("authorization") != f"Bearer {self.token}":
            return httpx.Response(401, json={"error": {"message": "missing or wrong bearer token"}})
        if request.url.path == "/admin/backends":
            return httpx.Response(200, json={"backends": [{"upstream": "old"}, {"upstream": "new"}]})
        if request.method == "PUT":
            if request.headers["if-match"] != str(self.view["version"]):
                return httpx.Response(412, json={"error": {"message": "stale"}})
            body = json.loads(request.content)
            self.puts.append(body)
            self.view = {**body, "version": self.view["version"] + 1}
        return httpx.Response(200, json=self.view, headers={"etag": str(self.view["version"])})


async def test_router_backend_writes_with_if_match_and_keeps_the_mirror() -> None:
    admin = FakeAdmin(token="s3cret")
    async with make_client(httpx.MockTransport(admin)) as client:
        backend = RouterBackend(client, "http://router:8000", token="s3cret")
        seen = await backend.read()
        assert seen.version == "3" and seen.targets == ("new", "old")
        written = await backend.write({"old": 60, "new": 40}, {"team": "infra", "x": "y"}, seen.version)
    assert written.version == "4" and written.weights == {"old": 60, "new": 40}
    assert admin.puts == [{"weights": {"old": 60, "new": 40}, "annotations": {"team": "infra", "x": "y"},
                           "mirror": {"to": "shadow", "percent": 5}}]  # fmt: skip


async def test_router_backend_refuses_a_stale_write_and_a_bad_token() -> None:
    admin = FakeAdmin()
    async with make_client(httpx.MockTransport(admin)) as client:
        backend = RouterBackend(client, "http://router:8000")
        seen = await backend.read()
        admin.view["version"] = 9
        with pytest.raises(StaleStateError, match="version 3, now 9"):
            await backend.write({"old": 60, "new": 40}, {}, seen.version)
        admin.token = "other"
        with pytest.raises(CutoverError, match="admin token") as err:
            await backend.read()
    assert err.value.hint is not None and "INFCTL_ROUTER_ADMIN_TOKEN" in err.value.hint
    assert admin.puts == []


async def test_router_backend_reads_the_split_the_router_applies() -> None:
    """No weights set: the router splits by capacity and reports it as ``applied``; that is the split."""
    admin = FakeAdmin()
    admin.view = {"weights": {}, "applied": {"old": 2.0, "new": 1.0}, "annotations": {}, "version": 0}
    async with make_client(httpx.MockTransport(admin)) as client:
        backend = RouterBackend(client, "http://router:8000")
        seen = await backend.read()
        assert seen.weights == {"old": 2.0, "new": 1.0} and seen.split_set is False
        written = await backend.write({"old": 100, "new": 0}, {}, seen.version)
    assert admin.puts[0]["weights"] == {"old": 100, "new": 0}  # the applied split is not written back
    assert written.split_set and written.weights == {"old": 100, "new": 0}
    admin.view = {"weights": {"old": 1}, "annotations": {}, "version": 1}  # a router without "applied"
    async with make_client(httpx.MockTransport(admin)) as client:
        seen = await RouterBackend(client, "http://router:8000").read()
    assert (seen.weights, seen.split_set) == ({"old": 1.0}, True)
