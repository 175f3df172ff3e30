"""From CLI options to targets: engine specs, profile expectations, a local release's plan."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from infctl.config import load_deployment
from infctl.doctor.resolve import build_request, engine_target, local_targets, parse_engine_spec
from infctl.errors import ConfigError
from infctl.local import build_plan
from infctl.local.admin_token import ensure_token, token_path
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan
from infctl.local.state import PLAN_FILE, RunState, write_json_atomic, write_state

PROFILES = Path(__file__).parents[3] / "profiles"


def test_engine_specs() -> None:
    assert parse_engine_spec("http://h:1,engine=sglang,model=m,role=prefill,kv_events=tcp://h:2") == {
        "url": "http://h:1",
        "engine": "sglang",
        "model": "m",
        "role": "prefill",
        "kv_events": "tcp://h:2",
    }
    with pytest.raises(ConfigError, match="cannot read 'colour=red'"):
        parse_engine_spec("http://h:1,colour=red")
    for bad in ("h:1", "http://:1", "http://h:99999"):  # the router's rule: scheme, host and port
        with pytest.raises(ConfigError, match=r"--engine-url .*(expected http\(s\)://host\[:port\]|range)"):
            parse_engine_spec(f"{bad},engine=vllm")
    with pytest.raises(ConfigError, match="known engines: sglang, vllm"):
        parse_engine_spec("http://h:1,engine=trt")
    with pytest.raises(ConfigError, match="role must be one of"):
        parse_engine_spec("http://h:1,role=encode")
    for bad in ("0", "two", "-1"):
        with pytest.raises(ConfigError, match="dp must be a count of ranks"):
            parse_engine_spec(f"http://h:1,dp={bad}")


def test_a_spec_names_the_data_parallel_ranks_behind_its_url() -> None:
    target = engine_target(parse_engine_spec("http://h:1,kv_events=tcp://h:5557,dp=4"))
    assert (target.data_parallel_size, target.kv_events) == (4, "tcp://h:5557")
    assert engine_target(parse_engine_spec("http://h:1")).data_parallel_size == 1


def test_a_profile_fills_in_what_a_spec_leaves_out() -> None:
    profile = load_deployment(PROFILES / "deepseek-v3-group.yaml")
    target = engine_target({"url": "http://10.0.0.7:30000"}, profile)
    assert (target.engine, target.model, target.prefix_caching) == ("sglang", "deepseek-v3", True)
    assert target.kv_events == "tcp://10.0.0.7:5557" and not target.precise  # the model publishes on 5557
    explicit = engine_target({"url": "http://10.0.0.7:30000", "engine": "vllm", "model": "x"}, profile)
    assert (explicit.engine, explicit.model) == ("vllm", "x")
    events = load_deployment(
        PROFILES / "local-demo.yaml", ["model.kv_events.port=6000", "router.policy=prefix_precise"]
    )
    target = engine_target({"url": "http://127.0.0.1:8100"}, events)
    assert target.kv_events == "tcp://127.0.0.1:6000" and target.precise


def test_local_release_targets_come_from_its_plan() -> None:
    profile = load_deployment(
        PROFILES / "local-demo.yaml",
        ["model.kv_events.enabled=true", "router.policy=prefix_precise", "replicas=2"],
    )
    plan = build_plan(profile, is_free=lambda _: True, run_dir=Path("/tmp/x"))
    engines, router = local_targets(plan)
    assert [e.url for e in engines] == ["http://127.0.0.1:8100", "http://127.0.0.1:8101"]
    assert engines[0].kv_events == "tcp://127.0.0.1:8102"
    assert engines[0].engine == "vllm" and engines[0].model == "llama3-8b" and engines[0].precise
    assert router is not None and router.url == "http://127.0.0.1:8000"  # the profile's router.port


def test_nothing_to_check_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing to check") as info:
        build_request()
    assert info.value.exit_code == 2
    request = build_request(engines=["http://h:1"], router="http://h:2", run_dir=tmp_path)
    assert [e.url for e in request.engines] == ["http://h:1"]
    assert request.router is not None and not request.checks_cluster and not request.checks_local
    kube = build_request(profile=load_deployment(PROFILES / "deepseek-v3-group.yaml"), run_dir=tmp_path)
    assert kube.checks_cluster and not kube.checks_local


def _running_release(run_dir: Path, overrides: list[str] | None = None) -> LocalPlan:
    """A local release as its supervisor leaves it: plan.json, a running state, no token file yet."""
    profile = load_deployment(PROFILES / "local-demo.yaml", overrides or [])
    plan = build_plan(profile, is_free=lambda _: True, run_dir=run_dir)
    data = {"plan": plan.to_dict(), "settings": asdict(SupervisorSettings())}
    write_json_atomic(plan.release_dir / PLAN_FILE, data)
    write_state(run_dir, RunState(release=plan.release, supervisor_pid=99, started_at=0.0, status="running",
                                  processes=()))  # fmt: skip
    return plan


def test_a_local_router_is_asked_with_the_releases_token_unless_one_is_exported(tmp_path: Path) -> None:
    plan = _running_release(tmp_path)
    alive = lambda pid, started: True  # noqa: E731
    request = build_request(local=plan.release, run_dir=tmp_path, alive=alive)
    assert request.router is not None and request.router.admin_token is None  # no file: ask without one
    token = ensure_token(token_path(plan))
    request = build_request(local=plan.release, run_dir=tmp_path, alive=alive)
    assert request.router is not None and request.router.admin_token == token
    exported = build_request(local=plan.release, run_dir=tmp_path, admin_token="from-env", alive=alive)
    assert exported.router is not None and exported.router.admin_token == "from-env"
    named = build_request(local=plan.release, router="http://h:2", run_dir=tmp_path, alive=alive)
    assert named.router is not None and named.router.admin_token is None  # not the local router's token


def test_a_local_releases_autoscaler_is_checked_from_its_plan(tmp_path: Path) -> None:
    plan = _running_release(
        tmp_path, ["autoscaler.enabled=true", "autoscaler.both.min=1", "autoscaler.both.max=2"]
    )
    alive = lambda pid, started: True  # noqa: E731
    (spec,) = [s for s in plan.specs if s.kind == "autoscaler"]
    assert build_request(local=plan.release, run_dir=tmp_path, alive=alive).autoscaler == spec.url
    named = build_request(local=plan.release, autoscaler="http://h:3", run_dir=tmp_path, alive=alive)
    assert named.autoscaler == "http://h:3"
    assert build_request(autoscaler="http://h:3", run_dir=tmp_path).autoscaler == "http://h:3"
