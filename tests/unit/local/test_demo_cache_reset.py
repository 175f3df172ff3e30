"""The demo starts its engines able to reset their prefix caches (vLLM's dev mode: VLLM_SERVER_DEV_MODE=1),
simulated or real, and tells the comparisons their engine; a deployed release opens vLLM's dev endpoints
only when its profile asks."""

from __future__ import annotations

import json
from pathlib import Path

from infctl.config import DeploymentProfile, load_deployment
from infctl.local import build_plan
from infctl.local.demo import DEMO_PROFILE, demo_plan, with_cache_resets
from infctl.local.spec import LocalPlan

ROOT = Path(__file__).resolve().parents[3]
DEV = "VLLM_SERVER_DEV_MODE"


def _profile(*overrides: str) -> DeploymentProfile:
    return load_deployment(ROOT / DEMO_PROFILE, [*overrides, "target=local"])


def _engine_env(plan: LocalPlan) -> list[dict[str, str]]:
    return [dict(s.env) for s in plan.specs if s.kind == "engine"]


def test_the_demo_starts_simulated_and_real_vllm_in_dev_mode() -> None:
    sims = demo_plan(_profile(), Path("/r"), is_free=lambda _: True)
    assert sims.engine == "vllm"
    assert [env.get(DEV) for env in _engine_env(sims)] == ["1"] * 4
    real = demo_plan(_profile("local.simulate=false"), Path("/r"), is_free=lambda _: True)
    assert [env.get(DEV) for env in _engine_env(real)] == ["1"] * 4
    assert LocalPlan.from_dict(json.loads(json.dumps(sims.to_dict()))).engine == "vllm"


def test_a_deployed_release_keeps_the_profiles_env() -> None:
    plan = build_plan(_profile(), is_free=lambda _: True, run_dir=Path("/r"))
    assert all(DEV not in env for env in _engine_env(plan))
    # The profile's env reaches the simulator standing in for vLLM, as it reaches vLLM.
    opted = build_plan(_profile(f"model.env.{DEV}=1"), is_free=lambda _: True, run_dir=Path("/r"))
    assert [env.get(DEV) for env in _engine_env(opted)] == ["1"] * 4


def test_a_profile_that_says_no_is_heard() -> None:
    assert with_cache_resets(_profile(f"model.env.{DEV}=0")).model.env[DEV] == "0"
    assert with_cache_resets(_profile("model.engine=sglang")).model.env == {}
