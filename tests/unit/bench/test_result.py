"""The JSON result (schema, names, aliases), compare() deltas, and the client-bottleneck warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infctl.bench import SLO, BenchConfig, LoadPlan, Stage, compare, summarize
from infctl.bench.compare import load_result
from infctl.bench.health import client_health
from infctl.bench.io import save_json, write_requests
from infctl.bench.load import LoopStats
from infctl.bench.records import RequestRecord
from infctl.bench.result import SCHEMA_VERSION, BenchResult, RunMetadata, StageResult
from infctl.errors import ConfigError


def record(i: int, sent: float, lag: float = 0.0, ttft: float = 0.1, n: int = 3) -> RequestRecord:
    chunks = [sent + ttft + 0.02 * k for k in range(n)]
    return RequestRecord(
        index=i,
        stage=0,
        scheduled_s=sent - lag,
        sent_s=sent,
        end_s=chunks[-1],
        chunk_times=chunks,
        input_tokens=50,
        output_tokens=n,
        output_from_usage=True,
    )


def result(ttft: float, rate: float = 10.0, label: str = "a") -> BenchResult:
    cfg = BenchConfig(
        url="http://x",
        load=LoadPlan(stages=[Stage(rate=rate, num_requests=20)]),
        slo=SLO(ttft_s=0.5),
        label=label,
    )
    recs = [record(i, i / rate, ttft=ttft) for i in range(20)]
    s = summarize(recs, cfg.slo)
    meta = RunMetadata(
        label,
        "2025-01-01T00:00:00+00:00",
        "2025-01-01T00:00:03+00:00",
        "0.1.0",
        "m",
        "http://x",
        "host",
        "CPython 3.11",
    )
    health = client_health(recs, cfg.load, LoopStats(cpu_s=0.1, wall_s=2.0, loop_lag_s=[0.001] * 10))
    return BenchResult(cfg, meta, s, [StageResult(0, "s", rate, 10.0, s)], health, None, recs)


def test_json_names_and_aliases() -> None:
    d = json.loads(json.dumps(result(0.1).to_dict()))
    assert d["schema_version"] == SCHEMA_VERSION
    for name in ("ttft", "tpot", "itl", "e2e"):
        assert {"mean", "p50", "p90", "p99", "median", "std", "p95", "p99.9", "max"} <= set(d[name])
    assert d["ttft"]["p50"] == pytest.approx(100.0)  # milliseconds
    assert d["tpot"]["mean"] == pytest.approx(20.0)
    v = d["aliases"]["vllm"]
    assert v["mean_ttft_ms"] == d["ttft"]["mean"] and v["p99_itl_ms"] == d["itl"]["p99"]
    assert (
        v["median_e2el_ms"] == d["e2e"]["median"] and v["request_goodput"] == d["goodput"]["requests_per_s"]
    )
    g = d["aliases"]["guidellm"]
    assert g["inter_token_latency_ms"]["mean"] == d["tpot"]["mean"]  # their ITL is our TPOT
    assert d["aliases"]["aiperf"]["inter_chunk_latency"]["p50"] == d["itl"]["p50"]
    assert d["metadata"]["load"]["stages"][0]["rate"] == 10.0 and d["metadata"]["slo"] == {"ttft_ms": 500.0}
    assert d["timeseries"]["requests_per_s"] and d["client"]["limited"] is False


def test_compare_deltas_in_percent(tmp_path: Path) -> None:
    a, b = result(0.2, label="round robin"), result(0.02, label="infctl")
    c = compare(a, b)
    row = c.row("TTFT p50")
    assert row.delta_pct == pytest.approx(-90.0) and row.better is True and row.ratio == pytest.approx(0.1)
    assert (c.a_label, c.b_label) == ("round robin", "infctl")
    pa, pb = save_json(a.to_dict(), tmp_path / "a.json"), save_json(b.to_dict(), tmp_path / "b.json")
    assert compare(load_result(pa), load_result(pb)).row("TTFT p50").delta_pct == pytest.approx(-90.0)


def test_load_result_rejects_foreign_and_newer_files(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(ConfigError, match="not an infctl bench result"):
        load_result(p)
    p.write_text(json.dumps({"schema": "infctl.bench.result", "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(ConfigError, match="newer"):
        load_result(p)


def test_requests_out_csv_and_jsonl(tmp_path: Path) -> None:
    recs = result(0.1).requests
    csv_text = write_requests(recs, tmp_path / "r.csv").read_text().splitlines()
    assert csv_text[0].startswith("index,stage,scheduled_s") and len(csv_text) == 21
    rows = [json.loads(x) for x in write_requests(recs, tmp_path / "r.jsonl").read_text().splitlines()]
    assert rows[0]["ttft_ms"] == pytest.approx(100.0) and rows[0]["itl_ms"] == pytest.approx([20.0, 20.0])


def test_client_bottleneck_warnings() -> None:
    plan = LoadPlan(stages=[Stage(rate=100.0, num_requests=50)])
    # scheduled every 10 ms, but each send left 5 ms later than the previous one's lag: the client fell behind
    late = [record(i, i * 0.015, lag=i * 0.005) for i in range(50)]
    h = client_health(late, plan, LoopStats(cpu_s=1.9, wall_s=2.0, loop_lag_s=[0.02] * 100))
    text = " | ".join(h.warnings)
    assert h.limited and "achieved" in text and "send lag" in text and "CPU" in text and "event loop" in text
    fine = [record(i, i * 0.01, lag=0.0005) for i in range(50)]
    ok = client_health(fine, plan, LoopStats(cpu_s=0.1, wall_s=2.0, loop_lag_s=[0.001] * 100))
    assert not ok.limited and ok.warnings == [] and ok.achieved_rate == pytest.approx(100.0)
