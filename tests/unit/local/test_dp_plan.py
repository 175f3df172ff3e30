"""Data-parallel engines on the local target: the plan's ports, engine commands and router backends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_plan import flag, plan_of, profile

from infctl.cli.router import parse_backend
from infctl.config.router import RouterFile
from infctl.errors import LocalTargetError
from infctl.local import LocalPlan, PortAllocator
from infctl.local.scaling import plan_slots
from infctl.router.config import from_file


def dp(ranks: int = 2, **changes: Any) -> Any:
    return profile(**{"model.data_parallel_size": ranks, "model.kv_events": {"port": 5557}, **changes})


def test_each_engine_runs_its_ranks_and_gets_a_kv_events_port_per_rank() -> None:
    plan = plan_of(dp(3))
    engines = plan.specs
    assert [s.port for s in engines] == [18000, 18001]
    assert [flag(s, "--data-parallel-size") for s in engines] == ["3", "3"]
    # Consecutive per engine: the simulator's rank r publishes on --kv-events-port + r.
    assert [flag(s, "--kv-events-port") for s in engines] == ["18002", "18005"]
    assert dict(engines[0].ports) == {"kv_events": 18002, "kv_events.dp1": 18003, "kv_events.dp2": 18004}
    assert engines[1].ports["kv_events.dp2"] == 18007
    assert [s.data_parallel_size for s in engines] == [3, 3]
    assert engines[0].backend_ids == tuple(f"http://127.0.0.1:18000#dp{r}" for r in range(3))


def test_a_rank_run_skips_past_a_busy_port() -> None:
    plan = plan_of(dp(2), is_free=lambda port: port != 18003)
    assert [s.ports["kv_events"] for s in plan.specs] == [18004, 18006]
    assert [s.ports["kv_events.dp1"] for s in plan.specs] == [18005, 18007]


def test_one_rank_keeps_a_plain_engine() -> None:
    spec = plan_of(dp(1)).specs[0]
    assert "--data-parallel-size" not in spec.argv
    assert dict(spec.ports) == {"kv_events": 18002}
    assert spec.dp_ranks == (None,) and spec.backend_ids == ("http://127.0.0.1:18000",)


def test_without_kv_events_no_port_is_reserved() -> None:
    plan = plan_of(dp(2, **{"model.kv_events": None}))
    assert [dict(s.ports) for s in plan.specs] == [{}, {}]
    assert [flag(s, "--data-parallel-size") for s in plan.specs] == ["2", "2"]
    assert "--kv-events-port" not in plan.specs[0].argv


def test_the_router_gets_every_rank_naming_the_engines_base_endpoint() -> None:
    plan = plan_of(dp(2, **{"router.enabled": True}))
    router = plan.specs[-1]
    backends = [router.argv[i + 1] for i, word in enumerate(router.argv) if word == "--backend"]
    assert backends == [
        "http://127.0.0.1:18000,role=both,dp_rank=0,kv_events=tcp://127.0.0.1:18002",
        "http://127.0.0.1:18000,role=both,dp_rank=1,kv_events=tcp://127.0.0.1:18002",
        "http://127.0.0.1:18001,role=both,dp_rank=0,kv_events=tcp://127.0.0.1:18004",
        "http://127.0.0.1:18001,role=both,dp_rank=1,kv_events=tcp://127.0.0.1:18004",
    ]
    # As the router reads them: one target per rank, each subscribed where its rank publishes.
    cfg = from_file(RouterFile(engine="vllm", backends=[parse_backend(b) for b in backends]))  # type: ignore[misc]
    assert [b.id for b in cfg.backends] == [bid for e in plan.specs[:2] for bid in e.backend_ids]
    subscribed = {s.endpoint: set(s.backends.values()) for s in cfg.kv_sources}
    assert subscribed == {
        f"tcp://127.0.0.1:{e.ports[key]}": {f"{e.url}#dp{rank}"}
        for e in plan.specs[:2]
        for rank, key in enumerate(("kv_events", "kv_events.dp1"))
    }


def test_reserve_engines_get_their_rank_runs_after_the_daemons() -> None:
    p = dp(2, **{"router.enabled": True, "autoscaler.enabled": True, "autoscaler.both": {"min": 1, "max": 3}})
    plan = plan_of(p)
    spare = plan.reserve[0]
    taken = [port for s in plan.specs for port in (s.port, *s.ports.values())] + [plan.control_port]
    assert spare.port > max(p for p in taken if p is not None)
    assert spare.ports["kv_events.dp1"] == spare.ports["kv_events"] + 1
    assert flag(spare, "--data-parallel-size") == "2"
    # A data-parallel engine scales as one slot: its ranks start and stop together.
    assert [[m.name for m in s.members] for s in plan_slots(plan)["both"]] == [
        ["engine-0"],
        ["engine-1"],
        ["engine-2"],
    ]
    assert LocalPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_real_data_parallel_engine_gets_the_base_endpoint_and_its_ranks_ports_are_held() -> None:
    plan = plan_of(dp(2, **{"local.simulate": False}))
    spec = plan.specs[0]
    assert flag(spec, "--data-parallel-size") == "2"
    # vLLM binds rank r's publisher on this port + r, the next port the plan holds for it.
    assert '"tcp://*:18002"' in flag(spec, "--kv-events-config")
    assert spec.ports["kv_events.dp1"] == 18003 and plan.specs[1].ports["kv_events"] == 18004


def test_simulated_pd_engines_cannot_be_data_parallel() -> None:
    p = dp(2, mode="group", replicas=None, groups=1, group={"prefill": 1, "decode": 1})
    with pytest.raises(LocalTargetError, match="aggregated mode only") as err:
        plan_of(p)
    assert err.value.hint is not None and "data_parallel_size=1" in err.value.hint


def test_take_run_hands_out_consecutive_free_ports_once() -> None:
    ports = PortAllocator(100, lambda port: port not in (102, 106), taken=[104])
    assert ports.take_run(2) == 100
    assert ports.take_run(2) == 107  # 102 busy, 104 taken, 106 busy
    assert ports.take() == 109  # never back below the last run
    with pytest.raises(LocalTargetError, match="no 3 consecutive free ports"):
        PortAllocator(65534, lambda port: True).take_run(3)


def test_plans_written_before_ranks_read_as_one_rank_engines() -> None:
    data = plan_of(profile()).to_dict()
    for spec in data["specs"]:
        del spec["data_parallel_size"]
    assert [s.data_parallel_size for s in LocalPlan.from_dict(data).specs] == [1, 1]
