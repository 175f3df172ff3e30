from pathlib import Path

import httpx
import pytest

from infctl.engines import sglang, vllm
from infctl.errors import EngineError, MetricsError
from infctl.telemetry import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    EngineSignals,
    LoadReport,
    fetch_load,
    make_client,
    scrape,
    scrape_many,
)
from infctl.telemetry.scrape import NoAnswer

FIXTURES = Path(__file__).parents[1] / "engines" / "fixtures"
VLLM_TEXT = (FIXTURES / "vllm_v0_11.prom").read_bytes()
SGLANG_TEXT = (FIXTURES / "sglang_v0_5.prom").read_bytes()


def _routes(routes: dict[str, httpx.Response | Exception]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        answer = routes.get(str(request.url), httpx.Response(404, text="not found"))
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler)


async def test_scrape_reads_vllm_metrics_into_signals() -> None:
    transport = _routes({"http://e1:8000/metrics": httpx.Response(200, content=VLLM_TEXT)})
    async with make_client(transport) as client:
        signals = await scrape(client, "http://e1:8000/", vllm.ADAPTER)
    assert signals.queue == 3.0 and signals.running == 12.0 and signals.cache_capacity_tokens == 928_000


async def test_scrape_reads_sglang_metrics_into_signals() -> None:
    transport = _routes({"http://e2:30000/metrics": httpx.Response(200, content=SGLANG_TEXT)})
    async with make_client(transport) as client:
        signals = await scrape(client, "http://e2:30000", sglang.ADAPTER)
    assert signals.queue == 4.0 and signals.kv_usage == 0.61


async def test_http_500_becomes_a_metrics_error_with_url_status_and_hint() -> None:
    transport = _routes({"http://e1:8000/metrics": httpx.Response(500, text="Internal Server Error")})
    async with make_client(transport) as client:
        with pytest.raises(MetricsError) as err:
            await scrape(client, "http://e1:8000", vllm.ADAPTER)
    assert "http://e1:8000/metrics" in err.value.message
    assert "HTTP 500" in err.value.message and "Internal Server Error" in err.value.message
    assert err.value.hint


async def test_sglang_404_hints_at_enable_metrics() -> None:
    async with make_client(_routes({})) as client:
        with pytest.raises(MetricsError) as err:
            await scrape(client, "http://e2:30000", sglang.ADAPTER)
    assert "HTTP 404" in err.value.message
    assert err.value.hint is not None and "--enable-metrics" in err.value.hint


async def test_connection_error_becomes_a_metrics_error() -> None:
    transport = _routes({"http://gone:8000/metrics": httpx.ConnectError("Connection refused")})
    async with make_client(transport) as client:
        with pytest.raises(MetricsError) as err:
            await scrape(client, "http://gone:8000", vllm.ADAPTER)
    assert "http://gone:8000/metrics" in err.value.message
    assert "ConnectError: Connection refused" in err.value.message
    assert err.value.hint is not None and "running" in err.value.hint


async def test_timeout_says_so() -> None:
    transport = _routes({"http://slow:8000/metrics": httpx.ReadTimeout("read timed out")})
    async with make_client(transport) as client:
        with pytest.raises(MetricsError, match="timed out"):
            await scrape(client, "http://slow:8000", vllm.ADAPTER)


async def test_an_unparseable_payload_names_the_url() -> None:
    body = b"vllm:num_requests_waiting{model_name=oops} 1\n"
    transport = _routes({"http://e1:8000/metrics": httpx.Response(200, content=body)})
    async with make_client(transport) as client:
        with pytest.raises(MetricsError, match=r"GET http://e1:8000/metrics: /metrics line 1"):
            await scrape(client, "http://e1:8000", vllm.ADAPTER)


async def test_scrape_many_keeps_order_and_returns_failures_as_values() -> None:
    transport = _routes(
        {
            "http://a:8000/metrics": httpx.Response(200, content=VLLM_TEXT),
            "http://b:8000/metrics": httpx.Response(503, text=""),
            "http://c:30000/metrics": httpx.Response(200, content=SGLANG_TEXT),
            "http://d:8000/metrics": httpx.ConnectError("refused"),
        }
    )
    targets = {
        "http://a:8000": vllm.ADAPTER,
        "http://b:8000": vllm.ADAPTER,
        "http://c:30000": sglang.ADAPTER,
        "http://d:8000": vllm.ADAPTER,
    }
    async with make_client(transport) as client:
        results = await scrape_many(client, targets, concurrency=2)
    assert list(results) == list(targets)
    assert isinstance(results["http://a:8000"], EngineSignals)
    assert isinstance(results["http://c:30000"], EngineSignals)
    b, d = results["http://b:8000"], results["http://d:8000"]
    assert isinstance(b, MetricsError) and "HTTP 503" in b.message and "(empty body)" in b.message
    assert isinstance(d, MetricsError) and "refused" in d.message


async def test_scrape_many_of_nothing() -> None:
    async with make_client(_routes({})) as client:
        assert await scrape_many(client, {}) == {}


async def test_fetch_load_vllm() -> None:
    transport = _routes({"http://a:8000/load": httpx.Response(200, json={"server_load": 3})})
    async with make_client(transport) as client:
        assert await fetch_load(client, "http://a:8000", vllm.ADAPTER) == LoadReport(in_flight=3.0)


async def test_fetch_load_sglang_falls_back_to_get_load_on_404() -> None:
    legacy = [{"dp_rank": 0, "num_reqs": 5, "num_waiting_reqs": 1, "num_tokens": 10}]
    transport = _routes({"http://s:30000/get_load": httpx.Response(200, json=legacy)})
    async with make_client(transport) as client:
        report = await fetch_load(client, "http://s:30000", sglang.ADAPTER)
    assert (report.running, report.waiting) == (4.0, 1.0)


async def test_fetch_load_errors() -> None:
    transport = _routes(
        {
            "http://s:30000/v1/loads": httpx.Response(500, text="boom"),
            "http://t:30000/v1/loads": httpx.Response(200, text="<html>"),
            "http://u:30000/v1/loads": httpx.ConnectError("refused"),
        }
    )
    async with make_client(transport) as client:
        with pytest.raises(EngineError, match="HTTP 500"):
            await fetch_load(client, "http://s:30000", sglang.ADAPTER)
        with pytest.raises(EngineError, match="non-JSON"):
            await fetch_load(client, "http://t:30000", sglang.ADAPTER)
        with pytest.raises(EngineError, match="refused"):
            await fetch_load(client, "http://u:30000", sglang.ADAPTER)
        with pytest.raises(EngineError, match="/load answered 404") as err:
            await fetch_load(client, "http://v:8000", vllm.ADAPTER)
    assert err.value.hint is not None and "--enable-server-load-tracking" in err.value.hint


async def test_make_client_defaults() -> None:
    async with make_client() as client:
        assert client.timeout == httpx.Timeout(DEFAULT_TIMEOUT_S, connect=DEFAULT_CONNECT_TIMEOUT_S)
        assert client.headers["accept"] == "text/plain"
    async with make_client(timeout=0.5) as client:
        assert client.timeout == httpx.Timeout(0.5)


async def test_any_getter_scrapes_like_the_httpx_client() -> None:
    """A bare ``Getter`` (what the router scrapes through) reads the same signals and the same failures."""
    pages: dict[str, tuple[int, bytes] | NoAnswer] = {
        "http://a:8000/metrics": (200, VLLM_TEXT),
        "http://b:8000/metrics": (503, b"overloaded"),
        "http://d:8000/metrics": NoAnswer("connect d:8000: ConnectionRefusedError", timed_out=False),
        "http://e:8000/metrics": NoAnswer("timed out (no upstream bytes for 1 s)", timed_out=True),
    }
    asked: list[str] = []

    async def get(url: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        asked.append(url)
        page = pages[url]
        if isinstance(page, NoAnswer):
            raise page
        return page

    targets = {url.removesuffix("/metrics"): vllm.ADAPTER for url in pages}
    results = await scrape_many(get, targets)
    assert asked == list(pages)
    transport = _routes({"http://a:8000/metrics": httpx.Response(200, content=VLLM_TEXT)})
    async with make_client(transport) as client:
        assert results["http://a:8000"] == await scrape(client, "http://a:8000", vllm.ADAPTER)
    b, d, e = (results[f"http://{h}:8000"] for h in "bde")
    assert isinstance(b, MetricsError) and "HTTP 503: 'overloaded'" in b.message
    assert isinstance(d, MetricsError) and "GET http://d:8000/metrics: connect d:8000" in d.message
    assert d.hint is not None and "running" in d.hint
    assert isinstance(e, MetricsError) and "timed out" in e.message
