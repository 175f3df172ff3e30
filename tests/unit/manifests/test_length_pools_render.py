"""Length pools rendered: engines per pool with their pool label, the router's buckets, per-pool autoscaling
targets and a per-pool dashboard, in aggregated, pool and group modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infctl.autoscaler.kubefile import parse_kube_file
from infctl.config import DeploymentProfile, load_deployment
from infctl.config.router import RouterFile
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects
from infctl.router.policies.buckets import parse_buckets

ROOT = Path(__file__).resolve().parents[3]
KIMI_POOLS = ROOT / "profiles" / "kimi-k2-length-pools.yaml"
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"

Obj = dict[str, Any]


def engine_objects(objs: list[Obj]) -> list[Obj]:
    return [
        o
        for o in objs
        if o["kind"] in ("Deployment", "LeaderWorkerSet") and o["metadata"]["labels"][L.COMPONENT] == "engine"
    ]


def config_file(objs: list[Obj], name: str) -> Obj:
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and f"{name}.yaml" in o.get("data", {}))
    data: Obj = yaml.safe_load(cm["data"][f"{name}.yaml"])
    return data


def pod_labels(obj: Obj) -> dict[str, str]:
    spec = obj["spec"]
    tpl = spec["template"] if obj["kind"] == "Deployment" else spec["leaderWorkerTemplate"]["leaderTemplate"]
    labels: dict[str, str] = tpl["metadata"]["labels"]
    return labels


def with_pools(path: Path, pools: list[Obj], **fields: Any) -> DeploymentProfile:
    """The shipped profile at ``path`` with its layout replaced by ``pools``."""
    base = load_deployment(path)
    data = base.model_dump(exclude_unset=True, mode="json")
    for key in ("replicas", "groups", "pools"):
        data.pop(key, None)
    for role in ("both", "prefill", "decode"):
        data.get("autoscaler", {}).pop(role, None)
    data["model"], data["cluster"] = base.model, base.cluster
    return DeploymentProfile.model_validate({**data, "length_pools": pools, **fields})


def test_the_shipped_kimi_profile_renders_each_pool_and_validates() -> None:
    objs = render(load_deployment(KIMI_POOLS))
    assert validate_objects(objs) == []
    engines = {o["metadata"]["name"]: o for o in engine_objects(objs)}
    seen = {
        n: (o["spec"]["replicas"], pod_labels(o)[L.POOL], pod_labels(o)[L.ROLE]) for n, o in engines.items()
    }
    assert seen == {
        "kimi-k2-pools-short-prefill": (2, "short", "prefill"),
        "kimi-k2-pools-short-decode": (4, "short", "decode"),
        "kimi-k2-pools-long-prefill": (1, "long", "prefill"),
        "kimi-k2-pools-long-decode": (1, "long", "decode"),
    }
    router = config_file(objs, "router")
    RouterFile.model_validate(router)
    buckets = parse_buckets(router["policy"]["buckets"])
    assert [(b.name, b.max_tokens, b.pools, b.spill_to) for b in buckets.buckets] == [
        ("short", 2048, ("short",), None),
        ("long", None, ("long",), ()),
    ]
    assert router["pd_mode"] == "pool"
    scaler = parse_kube_file(config_file(objs, "autoscaler"), "autoscaler.yaml")
    assert [(t.name, u.min, u.max) for t, u in zip(scaler.targets, scaler.units, strict=True)] == [
        ("kimi-k2-pools-short-prefill", 1, 4),
        ("kimi-k2-pools-short-decode", 2, 8),
        ("kimi-k2-pools-long-prefill", 1, 3),
        ("kimi-k2-pools-long-decode", 1, 2),
    ]
    targets = config_file(objs, "autoscaler")["targets"]
    assert [t["pool"] for t in targets] == ["short", "short", "long", "long"]


def test_the_length_pool_dashboard_breaks_every_panel_down_by_pool() -> None:
    objs = render(load_deployment(KIMI_POOLS))
    boards = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    pools = next(b for b in boards if "length-pools" in b["metadata"]["name"])
    board = json.loads(next(iter(pools["data"].values())))
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert exprs and all("infctl_io_pool" in e for e in exprs)
    assert "short <= 2048" in board["panels"][0]["title"]
    plain = render(load_deployment(QWEN))
    assert not any("length-pools" in o["metadata"]["name"] for o in plain)


def test_aggregated_pools_are_a_deployment_each_with_their_own_bounds() -> None:
    profile = with_pools(
        QWEN,
        [
            {
                "name": "short",
                "max_prompt_tokens": 4096,
                "replicas": 3,
                "autoscaler": {"both": {"min": 2, "max": 6}},
            },
            {"name": "long", "replicas": 1},
        ],
        autoscaler={"enabled": True},
    )
    objs = render(profile)
    assert validate_objects(objs) == []
    engines = {o["metadata"]["name"]: o for o in engine_objects(objs)}
    assert {n: (o["spec"]["replicas"], pod_labels(o)[L.POOL]) for n, o in engines.items()} == {
        "qwen3-8b-short": (3, "short"),
        "qwen3-8b-long": (1, "long"),
    }
    # Only the bounded pool is the autoscaler's: its target, and the annotation apply leaves alone.
    assert [t["name"] for t in config_file(objs, "autoscaler")["targets"]] == ["qwen3-8b-short"]
    annotated = {n for n, o in engines.items() if o["metadata"].get("annotations", {}).get(L.AUTOSCALED)}
    assert annotated == {"qwen3-8b-short"}


def test_group_pools_name_their_groups_apart_and_pin_each_to_a_switch() -> None:
    profile = with_pools(
        DEEPSEEK,
        [
            {"name": "short", "max_prompt_tokens": 2048, "groups": 2},
            {"name": "long", "groups": 1, "group": {"prefill": 2, "decode": 1}},
        ],
    )
    objs = render(profile)
    assert validate_objects(objs) == []
    engines = {o["metadata"]["name"]: o for o in engine_objects(objs)}
    seen = {
        n: (pod_labels(o)[L.GROUP], pod_labels(o)[L.POOL], o["spec"]["replicas"]) for n, o in engines.items()
    }
    assert seen == {
        "deepseek-v3-short-g0-prefill": ("short-g0", "short", 1),
        "deepseek-v3-short-g0-decode": ("short-g0", "short", 2),
        "deepseek-v3-short-g1-prefill": ("short-g1", "short", 1),
        "deepseek-v3-short-g1-decode": ("short-g1", "short", 2),
        "deepseek-v3-long-g0-prefill": ("long-g0", "long", 2),
        "deepseek-v3-long-g0-decode": ("long-g0", "long", 1),
    }
    for o in engines.values():
        tpl = o["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        own = tpl["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert own["labelSelector"]["matchLabels"][L.GROUP] == pod_labels(o)[L.GROUP]
    assert [b["name"] for b in config_file(objs, "router")["policy"]["buckets"]] == ["short", "long"]


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        ([{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}], "only the last pool has none"),
        ([{"name": "a", "max_prompt_tokens": 9, "replicas": 1}], "the last pool takes every longer prompt"),
        (
            [{"name": "a", "max_prompt_tokens": 9, "replicas": 1}, {"name": "a", "replicas": 1}],
            "must be unique",
        ),
        (
            [
                {"name": "a", "max_prompt_tokens": 9, "replicas": 1},
                {"name": "b", "max_prompt_tokens": 9, "replicas": 1},
                {"name": "c", "replicas": 1},
            ],
            "expected more than the previous pool's 9",
        ),
        (
            [
                {"name": "a", "max_prompt_tokens": 9, "replicas": 1, "spill_to": ["z"]},
                {"name": "b", "replicas": 1},
            ],
            "found ['z']",
        ),
        ([{"name": "a", "max_prompt_tokens": 9}, {"name": "b", "replicas": 1}], "expected a count"),
        (
            [
                {"name": "a", "max_prompt_tokens": 9, "prefill": 1, "replicas": 1},
                {"name": "b", "replicas": 1},
            ],
            "only used in pool mode",
        ),
        (
            [
                {
                    "name": "a",
                    "max_prompt_tokens": 9,
                    "replicas": 1,
                    "autoscaler": {"decode": {"min": 1, "max": 2}},
                },
                {"name": "b", "replicas": 1},
            ],
            "no decode replicas in aggregated mode",
        ),
    ],
)
def test_mistakes_in_length_pools_are_refused_with_where(pools: list[Obj], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("'", ".")):
        with_pools(QWEN, pools)


def test_layout_keys_beside_length_pools_are_refused() -> None:
    pools = [{"name": "a", "max_prompt_tokens": 9, "replicas": 1}, {"name": "b", "replicas": 1}]
    with pytest.raises(ValueError, match="replicas: length_pools give each pool its own replicas"):
        with_pools(QWEN, pools, replicas=3)
    with pytest.raises(ValueError, match="bounds are per pool"):
        with_pools(QWEN, pools, autoscaler={"enabled": True, "both": {"min": 1, "max": 2}})
    with pytest.raises(ValueError, match="no length pool has autoscaler bounds"):
        with_pools(QWEN, pools, autoscaler={"enabled": True})


def test_a_profile_file_mistake_names_its_line_and_the_fix(tmp_path: Path) -> None:
    text = KIMI_POOLS.read_text().replace("decode: 4\n", "decode: 4\n    spill_to: [medium]\n")
    path = tmp_path / "kimi.yaml"
    path.write_text(
        text.replace("models/", f"{ROOT}/profiles/models/").replace("clusters/", f"{ROOT}/profiles/clusters/")
    )
    with pytest.raises(ConfigError) as info:
        load_deployment(path)
    line = text.splitlines().index("    spill_to: [medium]") + 1
    assert f"kimi.yaml:{line}" in str(info.value) and "length_pools[0].spill_to" in str(info.value)
    assert "['medium']" in str(info.value)
