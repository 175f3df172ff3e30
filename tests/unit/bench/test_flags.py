"""Command-line forms: SLOs, durations, stages, mixtures, headers, length distributions."""

from __future__ import annotations

import math

import pytest

from infctl.bench.flags import (
    parse_headers,
    parse_json_object,
    parse_mix,
    parse_rate,
    parse_rates,
    parse_stages,
)
from infctl.bench.slo import SLO, parse_duration, parse_slo
from infctl.bench.workloads import LengthDist
from infctl.errors import ConfigError


def test_slo_units() -> None:
    assert parse_slo("ttft=2s,tpot=50ms") == SLO(ttft_s=2.0, tpot_s=0.05)
    assert parse_slo("ttft:500 e2e=1m") == SLO(ttft_s=0.5, e2e_s=60.0)  # bare numbers are ms
    assert str(parse_slo("tpot=50ms")) == "tpot=50ms"
    for bad in ("ttft", "speed=3s", "ttft=fast", ""):
        with pytest.raises(ConfigError):
            parse_slo(bad)


def test_duration() -> None:
    assert parse_duration("30s") == 30.0 and parse_duration("2m") == 120.0 and parse_duration("250ms") == 0.25
    assert parse_duration("5") == 5.0
    with pytest.raises(ConfigError):
        parse_duration("soon")


def test_stages_rates_ramps_concurrency() -> None:
    a, b, c, d = parse_stages("5:30s,1-20:1m,c8:100,inf:10")
    assert (a.rate, a.duration_s, a.mode) == (5.0, 30.0, "rate")
    assert (b.rate, b.rate_end, b.duration_s, b.mean_rate) == (1.0, 20.0, 60.0, 10.5)
    assert (c.concurrency, c.num_requests, c.mode) == (8, 100, "concurrency")
    assert d.rate is not None and math.isinf(d.rate) and d.num_requests == 10
    with pytest.raises(ConfigError, match="ramp"):
        parse_stages("1-20:100")  # a ramp needs a duration
    with pytest.raises(ConfigError):
        parse_stages("fast:10s")


def test_mix_headers_json_rates() -> None:
    short, long = parse_mix(["0.8/128/64", "0.2/normal:4096,512/256"])
    assert short.weight == 0.8 and short.input.mean == 128 and long.input.kind == "normal"
    with pytest.raises(ConfigError):
        parse_mix(["0.8/128"])
    assert parse_headers(["Authorization: Bearer x:y", "X-A:1"]) == {
        "Authorization": "Bearer x:y",
        "X-A": "1",
    }
    assert parse_json_object('{"ignore_eos": true}', "--extra-body") == {"ignore_eos": True}
    with pytest.raises(ConfigError):
        parse_json_object("[1]", "--extra-body")
    assert parse_rates("1, 2,inf")[:2] == [1.0, 2.0]
    with pytest.raises(ConfigError):
        parse_rate("-1")


def test_length_dist_forms() -> None:
    assert LengthDist.parse("512") == LengthDist(kind="fixed", mean=512)
    u = LengthDist.parse("uniform:256,768")
    assert (u.low, u.high, u.mean) == (256, 768, 512)
    assert LengthDist.parse("lognormal:512,0.5").sigma == 0.5
    for bad in ("normal:5", "zipf:1,2", "uniform:9,1", "-3"):
        with pytest.raises(ConfigError):
            LengthDist.parse(bad)
