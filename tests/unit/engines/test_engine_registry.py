import pytest

from infctl.engines import ENGINES, HealthSpec, get_adapter, sglang, vllm
from infctl.errors import ConfigError, EngineError
from infctl.telemetry import LoadReport, RankLoad


def test_registry_maps_profile_engine_names_to_adapters() -> None:
    assert dict(ENGINES) == {"vllm": vllm.ADAPTER, "sglang": sglang.ADAPTER}
    for name, adapter in ENGINES.items():
        assert adapter.name == name
        assert get_adapter(name) is adapter
        assert adapter.metrics_path == "/metrics" and adapter.health.path == "/health"
        assert adapter.default_image


def test_unknown_engine_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        get_adapter("trtllm")
    assert "'trtllm'" in err.value.message
    assert "sglang, vllm" in err.value.message
    assert err.value.exit_code == 2


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        ENGINES["x"] = vllm.ADAPTER  # type: ignore[index]


@pytest.mark.parametrize(
    ("spec", "status", "state"),
    [
        (vllm.ADAPTER.health, 200, "ready"),
        (vllm.ADAPTER.health, None, "starting"),
        (vllm.ADAPTER.health, 503, "dead"),
        (vllm.ADAPTER.health, 500, "unhealthy"),
        (sglang.ADAPTER.health, 503, "starting"),
        (HealthSpec(), 404, "unhealthy"),
    ],
)
def test_health_states(spec: HealthSpec, status: int | None, state: str) -> None:
    assert spec.state(status) == state


def test_sglang_has_a_deep_health_probe() -> None:
    assert sglang.ADAPTER.health.deep_path == "/health_generate"
    assert vllm.ADAPTER.health.deep_path is None


def test_vllm_load_body() -> None:
    assert vllm.ADAPTER.load_paths == ("/load",)
    assert vllm.ADAPTER.parse_load({"server_load": 7}) == LoadReport(in_flight=7.0)
    for bad in ({}, {"server_load": "7"}, {"server_load": True}, [1], None):
        with pytest.raises(EngineError, match="server_load"):
            vllm.ADAPTER.parse_load(bad)


def test_sglang_v1_loads_body_per_rank() -> None:
    body = {
        "timestamp": "2025-01-01T00:00:00+00:00",
        "dp_rank_count": 2,
        "loads": [
            {
                "dp_rank": 0,
                "num_running_reqs": 3,
                "num_waiting_reqs": 1,
                "token_usage": 0.5,
                "gen_throughput": 9.0,
            },
            {
                "dp_rank": 1,
                "num_running_reqs": 1,
                "num_waiting_reqs": 0,
                "token_usage": 0.1,
                "gen_throughput": 2.0,
            },
        ],
        "aggregate": {"total_running_reqs": 4},
    }
    report = sglang.ADAPTER.parse_load(body)
    assert report.in_flight == 5.0 and report.running == 4.0 and report.waiting == 1.0
    assert report.kv_usage == pytest.approx(0.3)
    assert report.ranks == (RankLoad(0, 3.0, 1.0, 0.5), RankLoad(1, 1.0, 0.0, 0.1))


def test_sglang_legacy_get_load_counts_num_reqs_as_running_plus_waiting() -> None:
    body = [{"dp_rank": 0, "num_reqs": 6, "num_waiting_reqs": 2, "num_tokens": 1234, "ts_tic": 1.0}]
    report = sglang.ADAPTER.parse_load(body)
    assert report == LoadReport(
        in_flight=6.0, running=4.0, waiting=2.0, kv_usage=None, ranks=(RankLoad(0, 4.0, 2.0, None),)
    )


@pytest.mark.parametrize("body", ["nope", {"loads": [1]}, [{"dp_rank": 0}], {"x": 1}])
def test_sglang_foreign_load_bodies_raise(body: object) -> None:
    with pytest.raises(EngineError):
        sglang.ADAPTER.parse_load(body)
