"""Real engines side by side on one machine: each gets its own ports for what its engine would otherwise bind
at a fixed default (vLLM's data-parallel RPC port and NIXL side channel, SGLang's DP-attention sockets and PD
bootstrap server); a simulated engine takes those its clients name."""

from __future__ import annotations

from typing import Any

from test_plan import flag, plan_of, profile

from infctl.config import ModelProfile
from infctl.local import PortAllocator
from infctl.local.engine_ports import host_port_args, placeholders, take_host_ports


def real(**changes: Any) -> Any:
    return profile(**{"local.simulate": False, **changes})


def every_port(plan: Any) -> list[int]:
    return [p for s in (*plan.specs, *plan.reserve) for p in (s.port, *s.ports.values())]


def test_two_data_parallel_vllm_engines_get_their_own_rpc_ports() -> None:
    plan = plan_of(real(**{"model.data_parallel_size": 2, "model.kv_events": {"port": 5557}}))
    engines = plan.specs
    # HTTP ports, then each engine's KV-events run (one port per rank), then each engine's RPC port.
    assert [flag(s, "--data-parallel-rpc-port") for s in engines] == ["18006", "18007"]
    assert [s.ports["dp_rpc"] for s in engines] == [18006, 18007]
    assert [s.ports["kv_events"] for s in engines] == [18002, 18004]
    assert flag(engines[0], "--data-parallel-size") == "2"
    assert len(set(every_port(plan))) == len(every_port(plan))


def test_the_rpc_port_skips_busy_ports_and_one_rank_needs_none() -> None:
    plan = plan_of(real(**{"model.data_parallel_size": 2}), is_free=lambda port: port not in (18002, 18003))
    assert [s.ports["dp_rpc"] for s in plan.specs] == [18004, 18005]
    single = plan_of(real())
    assert all("--data-parallel-rpc-port" not in s.argv and not s.ports for s in single.specs)


def test_simulated_engines_bind_no_host_ports() -> None:
    plan = plan_of(profile(**{"model.data_parallel_size": 2}))
    assert [dict(s.ports) for s in plan.specs] == [{}, {}]


def test_a_custom_engine_command_takes_the_rpc_port_as_a_placeholder() -> None:
    command = ["vllm-serve", "--port", "{port}", "--data-parallel-rpc-port", "{dp_rpc_port}", "{host}"]
    plan = plan_of(real(**{"model.data_parallel_size": 2, "local.engine_command": command}))
    assert [s.argv for s in plan.specs] == [
        ("vllm-serve", "--port", "18000", "--data-parallel-rpc-port", "18002", "127.0.0.1"),
        ("vllm-serve", "--port", "18001", "--data-parallel-rpc-port", "18003", "127.0.0.1"),
    ]


def test_reserve_engines_hold_their_own_rpc_ports() -> None:
    p = real(
        **{
            "model.data_parallel_size": 2,
            "router.enabled": True,
            "autoscaler.enabled": True,
            "autoscaler.both": {"min": 1, "max": 3},
        }
    )
    plan = plan_of(p)
    spare = plan.reserve[0]
    assert flag(spare, "--data-parallel-rpc-port") == str(spare.ports["dp_rpc"])
    assert len(set(every_port(plan))) == len(every_port(plan))


def test_sglang_dp_attention_engines_get_disjoint_dist_init_runs() -> None:
    model = {
        "engine": "sglang",
        "model": "org/m",
        "served_model_name": "m",
        "data_parallel_size": 2,
        "dp_attention": True,
    }
    plan = plan_of(real(model=model))
    a, b = plan.specs
    # Without the flag SGLang would derive both runs from --port + 233: 18233.. and 18234.., overlapping.
    assert [flag(s, "--dist-init-addr") for s in (a, b)] == ["127.0.0.1:18002", "127.0.0.1:18016"]
    assert a.ports["dist_init.13"] == 18015 and b.ports["dist_init"] == 18016
    assert len(a.ports) == 14 and len(set(every_port(plan))) == len(every_port(plan))
    plain = plan_of(real(model={**model, "dp_attention": False}))
    assert all("--dist-init-addr" not in s.argv and not s.ports for s in plain.specs)


def test_the_port_helpers_ignore_engines_without_host_ports() -> None:
    ports = PortAllocator(100, lambda port: True)
    other = ModelProfile(engine="sglang", model="m", data_parallel_size=2)
    assert take_host_ports(other, ports) == {} and ports.take() == 100
    vllm = ModelProfile(engine="vllm", model="m", data_parallel_size=2)
    taken = take_host_ports(vllm, ports)
    assert taken == {"dp_rpc": 101}
    assert placeholders(vllm, {**taken, "kv_events": 5}) == {"dp_rpc_port": 101}
    assert host_port_args(vllm, taken, "h") == ["--data-parallel-rpc-port", "101"]


SGLANG_PD = {"engine": "sglang", "model": "org/m", "served_model_name": "m",
             "pd": {"transfer_backend": "mooncake", "bootstrap_port": 8998},
             "sim": {"profile": "llama3-8b-h100", "num_gpu_blocks": 512, "speedup": 10}}  # fmt: skip


def sglang_pd(**changes: Any) -> Any:
    return profile(**{"mode": "group", "replicas": None, "groups": 2, "group": {"prefill": 1, "decode": 1},
                      "model": SGLANG_PD, "router.enabled": True, **changes})  # fmt: skip


def router_backends(plan: Any) -> dict[str, str]:
    (router,) = [s for s in plan.specs if s.kind == "router"]
    specs = [router.argv[i + 1] for i, word in enumerate(router.argv) if word == "--backend"]
    return {spec.split(",")[0]: spec for spec in specs}


def test_each_local_sglang_prefill_gets_its_own_bootstrap_port_and_its_router_backend_names_it() -> None:
    for simulate, bootstrap_flag in ((False, "--disaggregation-bootstrap-port"), (True, "--bootstrap-port")):
        plan = plan_of(sglang_pd(**{"local.simulate": simulate}))
        engines = [s for s in plan.specs if s.kind == "engine"]
        prefills = [s for s in engines if s.role == "prefill"]
        ports = [s.ports["bootstrap"] for s in prefills]
        # The profile's single 8998 on both would make the second prefill's bootstrap server fail to bind.
        assert len(prefills) == 2 and len(set(ports)) == 2 and 8998 not in ports
        assert [flag(s, bootstrap_flag) for s in prefills] == [str(p) for p in ports]
        assert all(s.argv.count(bootstrap_flag) == 1 for s in prefills)
        assert all("bootstrap" not in s.ports and bootstrap_flag not in s.argv
                   for s in engines if s.role == "decode")  # fmt: skip
        backends = router_backends(plan)
        for s, port in zip(prefills, ports, strict=True):
            assert backends[s.url].endswith(f",bootstrap_port={port}")
        assert not any("bootstrap_port" in b for b in backends.values() if "role=decode" in b)
        assert len(set(every_port(plan))) == len(every_port(plan))


def test_a_reserve_prefill_engine_has_its_own_bootstrap_port_too() -> None:
    bounds = {"min": 1, "max": 3}
    p = sglang_pd(**{"local.simulate": False, "autoscaler.enabled": True, "autoscaler.prefill": bounds,
                     "autoscaler.decode": bounds})  # fmt: skip
    plan = plan_of(p)
    spare = [s for s in plan.reserve if s.role == "prefill"]
    assert spare
    assert all(flag(s, "--disaggregation-bootstrap-port") == str(s.ports["bootstrap"]) for s in spare)
    assert len(set(every_port(plan))) == len(every_port(plan))


def test_the_users_own_bootstrap_flag_and_a_custom_command_placeholder() -> None:
    given = {**SGLANG_PD, "extra_args": ["--disaggregation-bootstrap-port", "9100"]}
    plan = plan_of(sglang_pd(model=given, **{"local.simulate": False}))
    assert not any("bootstrap" in s.ports for s in plan.specs)
    command = ["sglang-serve", "--port", "{port}", "--bootstrap", "{bootstrap_port}"]
    custom = plan_of(sglang_pd(**{"local.simulate": False, "local.engine_command": command}))
    prefill = next(s for s in custom.specs if s.role == "prefill")
    assert flag(prefill, "--bootstrap") == str(prefill.ports["bootstrap"])


def vllm_pd(**changes: Any) -> Any:
    return profile(**{"mode": "group", "replicas": None, "groups": 2, "group": {"prefill": 1, "decode": 1},
                      "router.enabled": True, **changes})  # fmt: skip


NIXL_PORT, NIXL_HOST = "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST"


def test_each_local_vllm_nixl_engine_gets_its_own_side_channel_port_by_variable() -> None:
    for simulate in (False, True):
        plan = plan_of(vllm_pd(**{"local.simulate": simulate}))
        engines = [s for s in plan.specs if s.kind == "engine"]
        # vLLM's default 5600 for all four: the second engine's handshake listener would fail to bind.
        ports = [s.ports["nixl_side_channel"] for s in engines]
        assert len(engines) == 4 and len(set(ports)) == 4 and 5600 not in ports
        assert [s.env[NIXL_PORT] for s in engines] == [str(p) for p in ports]
        assert all(s.env[NIXL_HOST] == "127.0.0.1" for s in engines)
        assert not any(NIXL_PORT in s.env or "--nixl-side-channel-port" in s.argv for s in plan.specs
                       if s.kind == "router")  # fmt: skip
        # The router needs none of it: the prefill names its port in its answer's kv_transfer_params.
        assert "nixl" not in " ".join(next(s for s in plan.specs if s.kind == "router").argv)
        assert len(set(every_port(plan))) == len(every_port(plan))


def test_a_data_parallel_nixl_engine_takes_a_side_channel_port_per_rank() -> None:
    plan = plan_of(vllm_pd(**{"local.simulate": False, "model.data_parallel_size": 2}))
    prefill = next(s for s in plan.specs if s.role == "prefill")
    first = prefill.ports["nixl_side_channel"]
    # Rank r binds the variable's port + r: both are the engine's, listed for the pre-flight check.
    assert prefill.ports["nixl_side_channel.1"] == first + 1 and prefill.env[NIXL_PORT] == str(first)
    assert len(set(every_port(plan))) == len(every_port(plan))


def test_the_users_own_side_channel_port_a_custom_command_and_a_reserve_engine() -> None:
    given = plan_of(vllm_pd(**{"local.simulate": False, "model.env": {NIXL_PORT: "7000"}}))
    assert all(s.env.get(NIXL_PORT) == "7000" and "nixl_side_channel" not in s.ports
               for s in given.specs if s.kind == "engine")  # fmt: skip
    command = ["vllm-serve", "--port", "{port}", "--side", "{nixl_side_channel_port}"]
    custom = plan_of(vllm_pd(**{"local.simulate": False, "local.engine_command": command}))
    prefill = next(s for s in custom.specs if s.role == "prefill")
    assert flag(prefill, "--side") == str(prefill.ports["nixl_side_channel"]) == prefill.env[NIXL_PORT]
    bounds = {"min": 1, "max": 3}
    scaled = plan_of(vllm_pd(**{"local.simulate": False, "autoscaler.enabled": True,
                                "autoscaler.prefill": bounds, "autoscaler.decode": bounds}))  # fmt: skip
    assert scaled.reserve
    assert all(s.env[NIXL_PORT] == str(s.ports["nixl_side_channel"]) for s in scaled.reserve)
    assert len(set(every_port(scaled))) == len(every_port(scaled))
    # SGLang's NIXL transfer is not vLLM's connector: its engines get no vLLM side channel.
    sglang = plan_of(sglang_pd(**{"local.simulate": False, "model.pd.transfer_backend": "nixl"}))
    engines = [s for s in sglang.specs if s.kind == "engine"]
    assert {s.role for s in engines} == {"prefill", "decode"} and all("nixl" in s.argv for s in engines)
    assert not any(NIXL_PORT in s.env or "nixl_side_channel" in s.ports for s in sglang.specs)
