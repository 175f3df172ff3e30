"""Length pools on the local target: the same profile's engines, labelled with their pools, and a router
given one bucket per pool (what a rendered router gets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_plan import PY, flag, profile

from infctl.autoscaler.profile import Layout, initial_counts, unit_configs
from infctl.config import load_deployment
from infctl.errors import LocalTargetError
from infctl.local import build_plan
from infctl.local.scaling import plan_slots
from infctl.manifests.daemons import router_file
from infctl.manifests.placement import plan_placement
from infctl.router.policies.pipeline import build_policy

ROOT = Path(__file__).resolve().parents[3]
POOLS = [
    {"name": "short", "max_prompt_tokens": 2048, "replicas": 2},
    {"name": "long", "replicas": 1, "spill_to": []},
]


def backends(argv: tuple[str, ...]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--backend"]


def test_engines_carry_their_pool_and_the_router_gets_the_buckets() -> None:
    p = profile(replicas=None, length_pools=POOLS, **{"router.enabled": True})
    plan = build_plan(p, is_free=lambda _: True, python=PY)
    router = plan.specs[-1]
    assert backends(router.argv) == [
        "http://127.0.0.1:18000,role=both,pool=short",
        "http://127.0.0.1:18001,role=both,pool=short",
        "http://127.0.0.1:18002,role=both,pool=long",
    ]
    policy = json.loads(flag(router, "--policy"))
    assert policy["buckets"] == p.router_policy()["buckets"] == list(plan.buckets)  # type: ignore[index]
    built = build_policy(policy)
    assert built.buckets is not None and [b.name for b in built.buckets.buckets] == ["short", "long"]


def test_group_pools_run_locally_with_groups_named_apart() -> None:
    pools = [
        {"name": "short", "max_prompt_tokens": 2048, "groups": 2},
        {"name": "long", "groups": 1},
    ]
    p = profile(
        mode="group",
        replicas=None,
        group={"prefill": 1, "decode": 1},
        length_pools=pools,
        **{"router.enabled": True},
    )
    engines = [s for s in build_plan(p, is_free=lambda _: True, python=PY).specs if s.kind == "engine"]
    assert [(s.name, s.group, s.pool, s.role) for s in engines] == [
        ("engine-short-g0-prefill-0", "short-g0", "short", "prefill"),
        ("engine-short-g0-decode-0", "short-g0", "short", "decode"),
        ("engine-short-g1-prefill-0", "short-g1", "short", "prefill"),
        ("engine-short-g1-decode-0", "short-g1", "short", "decode"),
        ("engine-long-g0-prefill-0", "long-g0", "long", "prefill"),
        ("engine-long-g0-decode-0", "long-g0", "long", "decode"),
    ]


def test_the_shipped_local_profile_and_a_rendered_router_share_the_buckets() -> None:
    local = load_deployment(ROOT / "profiles" / "local-length-pools.yaml")
    kube = load_deployment(ROOT / "profiles" / "kimi-k2-length-pools.yaml")
    plan = build_plan(local, is_free=lambda _: True, python=PY)
    assert [b["name"] for b in plan.buckets] == ["short", "long"]
    assert plan.buckets[0]["max_tokens"] == 2048 == kube.router_policy()["buckets"][0]["max_tokens"]  # type: ignore[index]
    rendered = router_file(kube, plan_placement(kube), "inference")
    assert rendered["policy"]["buckets"][0] == {"name": "short", "max_tokens": 2048, "pools": ["short"]}


def test_aggregated_length_pools_scale_one_unit_each_with_their_own_reserve() -> None:
    zero = {"both": {"min": 0, "max": 2}, "scale_to_zero": {"after_s": 300, "hold_s": 60}}
    p = profile(
        replicas=None,
        length_pools=[
            {**POOLS[0], "autoscaler": {"both": {"min": 1, "max": 3}}},
            {**POOLS[1], "autoscaler": zero},
        ],
        **{"autoscaler.enabled": True, "router.enabled": True},
    )
    plan = build_plan(p, is_free=lambda _: True, python=PY)
    assert [(s.name, s.pool) for s in plan.reserve] == [
        ("engine-short-2", "short"),
        ("engine-long-1", "long"),
    ]
    slots = plan_slots(plan)
    assert {u: [s.name for s in ss] for u, ss in slots.items()} == {
        "short": ["engine-short-0", "engine-short-1", "engine-short-2"],
        "long": ["engine-long-0", "engine-long-1"],
    }
    scaler = next(s for s in plan.specs if s.kind == "autoscaler")
    layout = Layout.from_json(flag(scaler, "--layout"))
    units = {u.name: (u.pool, u.min, u.max, u.scale_to_zero_after_s) for u in unit_configs(layout)}
    assert units == {"short": ("short", 1, 3, None), "long": ("long", 0, 2, 300.0)}
    assert initial_counts(layout) == {"short": 2, "long": 1}
    router = next(s for s in plan.specs if s.kind == "router")
    assert flag(router, "--hold-when-empty") == "60s"


def test_local_autoscaling_of_pd_length_pools_is_refused_with_the_fix() -> None:
    pools = [
        {"name": "short", "max_prompt_tokens": 2048, "prefill": 1, "decode": 1,
         "autoscaler": {"prefill": {"min": 1, "max": 2}}},
        {"name": "long", "prefill": 1, "decode": 1},
    ]  # fmt: skip
    p = profile(mode="pool", replicas=None, length_pools=pools, **{"autoscaler.enabled": True})
    with pytest.raises(LocalTargetError, match="aggregated engines") as info:
        build_plan(p, is_free=lambda _: True, python=PY)
    assert "autoscaler.enabled=false" in (info.value.hint or "")
