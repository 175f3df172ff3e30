from pathlib import Path
from typing import Any

import pytest

from infctl.config import DeploymentProfile
from infctl.engines.cmdline import python_module
from infctl.errors import LocalTargetError
from infctl.local import LocalPlan, PlanContext, PortAllocator, ProcessSpec, build_plan

PY = "/usr/bin/python3"


def profile(**changes: Any) -> DeploymentProfile:
    data: dict[str, Any] = {
        "name": "t",
        "target": "local",
        "mode": "aggregated",
        "replicas": 2,
        "model": {
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "served_model_name": "llama3-8b",
            "pd": {"kv_connector": "nixl"},
            "sim": {"profile": "llama3-8b-h100", "num_gpu_blocks": 512, "speedup": 10},
        },
        "local": {"base_port": 18000, "run_dir": "/tmp/runs"},
        "router": {"enabled": False},
    }
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return DeploymentProfile.model_validate(data)


def all_free(port: int) -> bool:
    return True


def plan_of(p: DeploymentProfile, is_free: Any = all_free, **kw: Any) -> LocalPlan:
    return build_plan(p, is_free=is_free, python=PY, **kw)


def flag(spec: ProcessSpec, name: str) -> str:
    return spec.argv[spec.argv.index(name) + 1]


def test_aggregated_engines_get_consecutive_ports_and_both_role() -> None:
    plan = plan_of(profile())
    assert [s.name for s in plan.specs] == ["engine-0", "engine-1"]
    assert [s.port for s in plan.specs] == [18000, 18001]
    assert {s.role for s in plan.specs} == {"both"}
    assert plan.specs[0].health_url == "http://127.0.0.1:18000/health"
    assert plan.release == "t" and plan.model == "llama3-8b"
    assert plan.run_dir == Path("/tmp/runs")
    assert plan.log_path("engine-0") == Path("/tmp/runs/t/logs/engine-0.log")


def test_group_mode_names_groups_and_roles() -> None:
    p = profile(mode="group", replicas=None, groups=2, group={"prefill": 1, "decode": 2})
    plan = plan_of(p)
    assert [s.name for s in plan.specs] == [
        "engine-g0-prefill-0",
        "engine-g0-decode-0",
        "engine-g0-decode-1",
        "engine-g1-prefill-0",
        "engine-g1-decode-0",
        "engine-g1-decode-1",
    ]
    assert [s.role for s in plan.specs[:3]] == ["prefill", "decode", "decode"]
    assert {s.group for s in plan.specs} == {"g0", "g1"}
    assert flag(plan.specs[0], "--role") == "prefill"


def test_pool_mode_labels_pools() -> None:
    plan = plan_of(profile(mode="pool", replicas=None, pools={"prefill": 1, "decode": 1}))
    assert [(s.name, s.pool, s.role) for s in plan.specs] == [
        ("engine-prefill-0", "prefill", "prefill"),
        ("engine-decode-0", "decode", "decode"),
    ]


def test_simulated_engine_command() -> None:
    spec = plan_of(profile()).specs[1]
    assert spec.argv[:4] == (PY, "-m", "infctl", "sim")
    assert flag(spec, "--personality") == "vllm"
    assert flag(spec, "--profile") == "llama3-8b-h100"
    assert flag(spec, "--model") == "llama3-8b"
    assert flag(spec, "--port") == "18001"
    assert flag(spec, "--num-gpu-blocks") == "512"
    # Profile speedup 10 (ten times faster) is the simulator's 0.1 wall seconds per simulated second.
    assert flag(spec, "--time-scale") == "0.1"
    assert "--kv-events-port" not in spec.argv


def test_busy_ports_are_skipped() -> None:
    busy = {18000, 18002}
    plan = plan_of(profile(replicas=3), is_free=lambda port: port not in busy)
    assert [s.port for s in plan.specs] == [18001, 18003, 18004]


def test_kv_event_ports_follow_the_http_ports_one_per_engine() -> None:
    plan = plan_of(profile(**{"model.kv_events": {"port": 5557}}), is_free=lambda port: port != 18003)
    assert [s.port for s in plan.specs] == [18000, 18001]
    assert [s.ports["kv_events"] for s in plan.specs] == [18002, 18004]
    assert [flag(s, "--kv-events-port") for s in plan.specs] == ["18002", "18004"]


def test_real_engine_uses_the_adapter_command_with_this_python() -> None:
    plan = plan_of(profile(**{"local.simulate": False, "model.kv_events": {"port": 5557}}))
    spec = plan.specs[0]
    assert spec.argv[0] == PY and python_module(spec.argv) == "vllm.entrypoints.cli.main"
    assert spec.argv[4:6] == ("serve", "meta-llama/Llama-3.1-8B-Instruct")
    assert "infctl" not in spec.argv
    assert flag(spec, "--port") == "18000"
    assert flag(spec, "--host") == "127.0.0.1"
    assert '"tcp://*:18002"' in flag(spec, "--kv-events-config")
    assert spec.install_hint is not None and "local.simulate" in spec.install_hint


def test_engine_command_placeholders() -> None:
    command = ["my-engine", "--port={port}", "--role", "{role}", "--name", "{model}"]
    plan = plan_of(profile(**{"local.simulate": False, "local.engine_command": command}))
    assert plan.specs[1].argv == ("my-engine", "--port=18001", "--role", "both", "--name", "llama3-8b")


def test_run_dir_override() -> None:
    assert plan_of(profile(), run_dir=Path("/elsewhere")).release_dir == Path("/elsewhere/t")


def fake_router(ctx: PlanContext) -> list[ProcessSpec]:
    urls = ",".join(e.url for e in ctx.engines)
    port = ctx.ports.take()
    argv = (ctx.python, "-m", "infctl", "router", "--port", str(port), "--engines", urls)
    return [ProcessSpec(name="router", kind="router", argv=argv, port=port)]


def test_daemon_builders_extend_the_plan_after_the_engines() -> None:
    plan = plan_of(profile(), is_free=lambda port: port != 18002, daemons=[fake_router])
    router = plan.specs[-1]
    assert router.port == 18003
    assert flag(router, "--engines") == "http://127.0.0.1:18000,http://127.0.0.1:18001"
    assert plan.entrypoint is router
    assert [[s.kind for s in stage] for stage in plan.stages()] == [["engine", "engine"], ["router"]]


def test_without_a_router_the_first_engine_is_the_entrypoint() -> None:
    plan = plan_of(profile())
    assert plan.entrypoint is plan.specs[0]
    assert len(plan.stages()) == 1


def test_the_default_daemons_add_nothing_yet() -> None:
    assert [s.kind for s in plan_of(profile()).specs] == ["engine", "engine"]


def test_plan_round_trips_through_json() -> None:
    fields = {"model.kv_events": {"port": 5557}, "model.max_model_len": 8192}
    plan = plan_of(profile(**fields), daemons=[fake_router])
    assert plan.max_model_len == 8192  # the demo cuts its documents to it
    assert LocalPlan.from_dict(plan.to_dict()) == plan


def test_port_allocator_gives_each_port_once_and_fails_past_the_last() -> None:
    ports = PortAllocator(65534, all_free, taken=[65534])
    assert ports.take() == 65535
    with pytest.raises(LocalTargetError, match="no free port"):
        ports.take()


def test_router_spec_lists_every_engine_with_role_group_and_kv_events() -> None:
    p = profile(
        **{
            "router.enabled": True,
            "router.policy": "cache_aware",
            "router.settings": {"gate_abs": 4},
            "model.kv_events": {"port": 5557},
            "model.sim.block_size": 32,
        }
    )
    plan = plan_of(p)
    router = plan.specs[-1]
    assert router.kind == "router" and plan.entrypoint is router
    assert router.argv[:4] == (PY, "-m", "infctl", "router")
    backends = [router.argv[i + 1] for i, a in enumerate(router.argv) if a == "--backend"]
    assert backends == [
        "http://127.0.0.1:18000,role=both,kv_events=tcp://127.0.0.1:18002",
        "http://127.0.0.1:18001,role=both,kv_events=tcp://127.0.0.1:18003",
    ]
    assert router.port == 18004
    assert flag(router, "--block-size") == "32"
    assert '"gate_abs": 4' in flag(router, "--policy")


def test_router_spec_passes_the_pd_mode() -> None:
    p = profile(mode="group", replicas=None, group={"prefill": 1, "decode": 1}, **{"router.enabled": True})
    router = plan_of(p).specs[-1]
    assert flag(router, "--pd-mode") == "group"
    assert any(a.endswith("role=prefill,group=g0") for a in router.argv)


def test_custom_engine_command_fills_placeholders_and_keeps_json_arguments() -> None:
    command = [
        "vllm-python",
        "-m",
        "vllm",
        "--port",
        "{port}",
        "--kv-transfer-config",
        '{"kv_role":"kv_both"}',
    ]
    plan = plan_of(profile(**{"local.simulate": False, "local.engine_command": command}))
    assert plan.specs[0].argv[4] == "18000"
    assert plan.specs[0].argv[-1] == '{"kv_role":"kv_both"}'


def test_simulated_engines_and_their_router_share_the_sims_tokenizer(tmp_path: Path) -> None:
    words = plan_of(profile(**{"router.enabled": True}))
    assert all("--tokenizer" not in s.argv for s in words.specs if s.kind == "engine")
    assert flag(words.specs[-1], "--tokenizer") == "words"
    real = plan_of(profile(**{"router.enabled": True, "model.sim.tokenizer": str(tmp_path)}))
    assert [flag(s, "--tokenizer") for s in real.specs] == [str(tmp_path)] * 3


def test_a_simulated_engine_trusts_request_templates_as_the_profiles_engine_would() -> None:
    """vLLM refuses a chat request's own chat_template unless started with --trust-request-chat-template:
    a profile naming it in extra_args gets a simulator started with it too."""
    assert all("--trust-request-chat-template" not in s.argv for s in plan_of(profile()).specs)
    trusting = plan_of(profile(**{"model.extra_args": ["--trust-request-chat-template"]}))
    assert all("--trust-request-chat-template" in s.argv for s in trusting.specs if s.kind == "engine")


def test_the_router_trusts_request_templates_when_its_engines_do() -> None:
    """The router renders a chat's own template only when the engines will (the same extra_args check)."""
    (router,) = [s for s in plan_of(profile(**{"router.enabled": True})).specs if s.kind == "router"]
    assert "--trust-request-chat-template" not in router.argv
    trusting = profile(**{"router.enabled": True, "model.extra_args": ["--trust-request-chat-template"]})
    (router,) = [s for s in plan_of(trusting).specs if s.kind == "router"]
    assert "--trust-request-chat-template" in router.argv
