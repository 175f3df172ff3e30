"""Bench flags turned into the config's workload and load sections (shared by bench and simulate)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from infctl.bench.workloads import LengthDist
from infctl.cli.bench_plan import load_plan, workload_kind, workload_spec
from infctl.errors import ConfigError

OTHER: dict[str, Any] = {
    "groups": 4, "prefix_tokens": 64, "zipf": 0.5, "trace": None, "conversations": 2, "turns": 3,
    "system_tokens": 8, "dataset": None, "time_compression": 2.0, "input_scale": 0.5, "output_scale": 1.0,
    "trace_block_size": 16, "max_input_tokens": None,
}  # fmt: skip


def load(kind: str = "random", **kw: Any) -> dict[str, Any]:
    args = {"n": None, "duration": None, "rate": None, "conc": None, "stages": None}
    return load_plan(kind, **{**args, **kw}, arrivals="poisson", burstiness=1.0, warmup=0, max_conc=None)


@pytest.mark.parametrize(
    ("workload", "trace", "dataset", "mix", "kind"),
    [
        (None, None, None, None, "random"),
        (None, Path("t.jsonl"), None, None, "trace"),
        (None, None, Path("d.json"), None, "sharegpt"),
        (None, None, None, ["1/8/8"], "mixture"),
        ("shared-prefix", Path("t.jsonl"), None, None, "shared-prefix"),  # an explicit --workload wins
    ],
)
def test_the_kind_file_flags_imply(
    workload: str | None, trace: Path | None, dataset: Path | None, mix: list[str] | None, kind: str
) -> None:
    assert workload_kind(workload, trace=trace, dataset=dataset, mix=mix) == kind


def test_workload_sections_carry_their_own_flags() -> None:
    assert workload_spec("random", "512", "uniform:8,16", None, OTHER) == {
        "kind": "random", "input": LengthDist(mean=512), "output": LengthDist.parse("uniform:8,16"),
    }  # fmt: skip
    shared = workload_spec("shared-prefix", "32", "8", None, OTHER)
    assert (shared["groups"], shared["prefix_tokens"], shared["zipf"]) == (4, 64, 0.5)
    trace = workload_spec("trace", "1", "1", None, {**OTHER, "trace": Path("t.jsonl")})
    assert (trace["path"], trace["block_size"], trace["time_compression"]) == (Path("t.jsonl"), 16, 2.0)
    flags = {**OTHER, "dataset": Path("d"), "max_input_tokens": 3000}
    sharegpt = workload_spec("sharegpt", "1", "1", None, flags)
    assert (sharegpt["max_input_tokens"], sharegpt["max_total_tokens"]) == (3000, 6000)


@pytest.mark.parametrize(
    ("kind", "message"),
    [("mixture", "needs components"), ("trace", "needs a file"), ("sharegpt", "needs a file"),
     ("zipfian", "is not one of")],
)  # fmt: skip
def test_workload_errors_name_the_flag(kind: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        workload_spec(kind, "1", "1", None, OTHER)


def test_one_stage_by_default_and_a_trace_keeps_its_pace() -> None:
    assert load()["stages"] == [{"num_requests": 100, "rate": math.inf}]
    assert load(n=5, conc=2)["stages"] == [{"num_requests": 5, "concurrency": 2}]
    assert load("trace")["stages"] == [{}]


@pytest.mark.parametrize(
    ("kw", "message"),
    [({"stages": "5:30s", "rate": "2"}, "--stages replaces"), ({"rate": "2", "conc": 3}, "not both"),
     ({"duration": "30s"}, "needs a pace")],
)  # fmt: skip
def test_conflicting_load_flags(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(**kw)


@pytest.mark.parametrize(
    ("kw", "flag"),
    [({"n": 0}, "-n 0"), ({"n": -5}, "-n -5"), ({"conc": 0}, "--concurrency 0")],
)
def test_a_count_below_one_is_refused_naming_the_flag(kw: dict[str, Any], flag: str) -> None:
    """-n 0 and --concurrency 0 read as "not given" and quietly ran 100 requests at an infinite rate."""
    with pytest.raises(ConfigError) as err:
        load(**kw)
    assert err.value.message == f"{flag}: expected an integer >= 1"


def test_a_negative_warmup_or_a_zero_cap_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--warmup -1: expected an integer >= 0"):
        load_plan("random", 10, None, "5", None, None, "poisson", 1.0, -1, None)
    with pytest.raises(ConfigError, match=r"^--max-concurrency 0: expected an integer >= 1"):
        load_plan("random", 10, None, "5", None, None, "poisson", 1.0, 0, 0)
