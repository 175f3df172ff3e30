"""Metric formulas on hand-computed cases (REFERENCE.md section 3)."""

from __future__ import annotations

import math

import pytest

from infctl.bench.metrics import request_metrics, summarize
from infctl.bench.records import RequestRecord
from infctl.bench.slo import SLO
from infctl.bench.stats import describe, percentile


def rec(
    i: int, sent: float, chunks: list[float], out: int, *, end: float | None = None, **kw: object
) -> RequestRecord:
    r = RequestRecord(
        index=i,
        stage=0,
        scheduled_s=sent,
        sent_s=sent,
        chunk_times=chunks,
        output_tokens=out,
        input_tokens=100,
        end_s=end if end is not None else (chunks[-1] if chunks else sent),
    )
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_one_request_by_hand() -> None:
    # sent at 1.0, content at 1.2, 1.25, 1.35, 1.40: TTFT 200 ms, E2E 400 ms, 4 tokens -> TPOT (400-200)/3 ms
    m = request_metrics(rec(0, 1.0, [1.2, 1.25, 1.35, 1.40], 4))
    assert m.ttft_s == pytest.approx(0.2)
    assert m.e2e_s == pytest.approx(0.4)
    assert m.tpot_s == pytest.approx(0.2 / 3)
    assert m.itl_s == pytest.approx((0.05, 0.10, 0.05))


def test_tpot_uses_usage_tokens_not_chunks() -> None:
    # two chunks carrying 5 tokens (stream interval > 1): TPOT divides by 5 - 1, ITL has one gap
    m = request_metrics(rec(0, 0.0, [0.1, 0.5], 5))
    assert m.tpot_s == pytest.approx(0.4 / 4)
    assert m.itl_s == pytest.approx((0.4,))


def test_single_token_has_no_tpot_and_failed_has_nothing() -> None:
    assert request_metrics(rec(0, 0.0, [0.3], 1)).tpot_s is None
    failed = request_metrics(rec(0, 0.0, [0.1, 0.2], 2, error="truncated_stream"))
    assert failed.ttft_s is None and failed.itl_s == ()


def test_percentile_interpolates_like_numpy() -> None:
    data = [1.0, 2.0, 3.0, 4.0]
    assert percentile(data, 50) == 2.5
    assert percentile(data, 90) == pytest.approx(3.7)  # numpy.percentile([1,2,3,4], 90)
    assert percentile([5.0], 99) == 5.0
    d = describe([4.0, 1.0, 3.0, 2.0])
    assert (d.mean, d.median, d.min, d.max) == (2.5, 2.5, 1.0, 4.0)
    assert d.std == pytest.approx(math.sqrt(1.25))  # population std
    assert d["p99.9"] == pytest.approx(3.997)
    assert describe([]).count == 0 and math.isnan(describe([]).mean)


def test_summary_throughput_goodput_and_errors() -> None:
    records = [
        rec(0, 0.0, [0.1, 0.2, 0.3], 3, end=0.31),  # ttft 100, tpot 100
        rec(1, 0.5, [1.5, 1.6], 2, end=1.6),  # ttft 1000 -> misses ttft<=500ms
        rec(2, 1.0, [1.05], 1, end=1.1),  # 1 token: meets any TPOT objective
        rec(3, 1.5, [], 0, end=3.0, error="http_status", status=503, error_detail="HTTP 503: busy"),
        rec(4, 1.6, [1.7], 1, end=2.0, error="in_stream_error"),
    ]
    s = summarize(records, SLO(ttft_s=0.5, tpot_s=0.2))
    assert s.duration_s == pytest.approx(3.0)  # first send 0.0 -> last completion 3.0
    assert (s.total, s.completed, s.failed) == (5, 3, 2)
    assert s.request_throughput == pytest.approx(1.0)
    assert s.total_output_tokens == 6 and s.output_throughput == pytest.approx(2.0)
    assert s.total_token_throughput == pytest.approx((300 + 6) / 3.0)
    assert s.good == 2 and s.goodput == pytest.approx(2 / 3.0)
    assert s.good_fraction == pytest.approx(2 / 5)  # failed requests count as not good
    assert s.ttft.count == 3 and s.ttft.mean == pytest.approx((0.1 + 1.0 + 0.05) / 3)
    assert s.tpot.count == 2  # the one-token request has none
    assert s.itl.count == 3  # pooled: two gaps + one gap
    assert s.errors == {"http_status": 1, "in_stream_error": 1}
    assert s.error_kinds == {"http_503": 1, "in_stream_error": 1}
    assert s.error_examples["http_503"] == "HTTP 503: busy"


def test_e2e_slo_and_cached_fraction() -> None:
    a = rec(0, 0.0, [0.1, 2.0], 2, cached_tokens=50)
    b = rec(1, 0.0, [0.1, 0.5], 2, cached_tokens=0)
    s = summarize([a, b], SLO(e2e_s=1.0))
    assert s.good == 1
    assert s.cached_tokens == 50 and s.cached_fraction == pytest.approx(0.25)
    assert summarize([a, b]).goodput is None
