"""PD groups scheduled whole: one PodGroup per group (Volcano or scheduler-plugins coscheduling) holding every
pod of the group, validated against the shipped CRD schemas; pod affinity alone when no gang scheduler is
chosen, which doctor warns about; doctor checks the chosen scheduler's CRD is served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor.crds import evaluate_crds
from infctl.doctor.topology import evaluate_gang
from infctl.manifests import labels as L
from infctl.manifests.gang import COSCHEDULING_GROUP, VOLCANO_GROUP
from infctl.manifests.kinds import kind_of
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
KIMI = ROOT / "profiles" / "kimi-k2-pool.yaml"
SCHEDULERS = {
    "volcano": ({"queue": "llm", "network_tier": 1}, "scheduling.volcano.sh/v1beta1", "volcano"),
    "scheduler-plugins": (
        {"schedule_timeout_s": 600},
        "scheduling.x-k8s.io/v1alpha1",
        "scheduler-plugins-scheduler",
    ),
}


def with_gang(path: Path, gang: dict[str, Any], *overrides: str) -> DeploymentProfile:
    profile = load_deployment(path, list(overrides))
    assert profile.cluster is not None
    cluster = profile.cluster.model_validate({**profile.cluster.model_dump(exclude_unset=True), "gang": gang})
    return profile.model_copy(update={"cluster": cluster})


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Deployment":
        return [obj["spec"]["template"]]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [lwt["leaderTemplate"], lwt["workerTemplate"]]


def member_of(template: dict[str, Any], scheduler: str) -> str:
    meta = template["metadata"]
    if scheduler == "volcano":
        return str(meta["annotations"][VOLCANO_GROUP])
    return str(meta["labels"][COSCHEDULING_GROUP])


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_every_pod_of_a_group_belongs_to_its_podgroup_of_all_its_pods(scheduler: str) -> None:
    extra, api, pod_scheduler = SCHEDULERS[scheduler]
    objs = render(with_gang(DEEPSEEK, {"scheduler": scheduler, **extra}, "groups=3"))
    assert validate_objects(objs) == []
    groups = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PodGroup"}
    assert set(groups) == {"deepseek-v3-g0", "deepseek-v3-g1", "deepseek-v3-g2"}
    assert all(g["apiVersion"] == api for g in groups.values())
    pods: dict[str, int] = {}
    for obj in objs:
        if obj["kind"] != "LeaderWorkerSet":
            continue
        size = obj["spec"]["leaderWorkerTemplate"]["size"]
        for i, tpl in enumerate(pod_templates(obj)):
            assert tpl["spec"]["schedulerName"] == pod_scheduler
            name = member_of(tpl, scheduler)
            assert name == f"deepseek-v3-{tpl['metadata']['labels'][L.GROUP]}"
            # The switch is still a required affinity to the group: the gang decides when, affinity where.
            assert tpl["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            pods[name] = pods.get(name, 0) + obj["spec"]["replicas"] * (1 if i == 0 else size - 1)
    assert {n: g["spec"]["minMember"] for n, g in groups.items()} == pods == dict.fromkeys(groups, 6)
    first_engine = next(i for i, o in enumerate(objs) if o["kind"] == "LeaderWorkerSet")
    assert max(i for i, o in enumerate(objs) if o["kind"] == "PodGroup") < first_engine
    if scheduler == "volcano":
        assert groups["deepseek-v3-g0"]["spec"]["networkTopology"] == {
            "mode": "hard",
            "highestTierAllowed": 1,
        }
        assert groups["deepseek-v3-g0"]["spec"]["queue"] == "llm"


def test_the_crd_schema_refuses_a_field_the_scheduler_does_not_know() -> None:
    objs = render(with_gang(DEEPSEEK, {"scheduler": "scheduler-plugins"}))
    group = next(o for o in objs if o["kind"] == "PodGroup")
    group["spec"]["queue"] = "llm"  # Volcano's field, not coscheduling's
    assert any("queue" in p for p in validate_objects([group]))


def test_length_pool_groups_get_podgroups_of_their_own() -> None:
    profile = with_gang(DEEPSEEK, {"scheduler": "volcano"})
    data = profile.model_dump(exclude_unset=True, mode="json")
    data.pop("groups", None)
    data["model"], data["cluster"] = profile.model, profile.cluster
    data["length_pools"] = [
        {"name": "short", "max_prompt_tokens": 2048, "groups": 1},
        {"name": "long", "groups": 1},
    ]
    objs = render(DeploymentProfile.model_validate(data))
    assert sorted(o["metadata"]["name"] for o in objs if o["kind"] == "PodGroup") == [
        "deepseek-v3-long-g0",
        "deepseek-v3-short-g0",
    ]


def test_no_podgroup_outside_group_mode_nor_without_a_gang_scheduler() -> None:
    assert not [o for o in render(with_gang(KIMI, {"scheduler": "volcano"})) if o["kind"] == "PodGroup"]
    plain = render(load_deployment(DEEPSEEK))
    assert not [o for o in plain if o["kind"] == "PodGroup"]
    assert all(
        "schedulerName" not in t["spec"]
        for o in plain
        if o["kind"] == "LeaderWorkerSet"
        for t in pod_templates(o)
    )


def test_scheduler_settings_belong_to_their_scheduler() -> None:
    with pytest.raises(ValueError, match="only used with scheduler volcano"):
        with_gang(DEEPSEEK, {"scheduler": "scheduler-plugins", "queue": "llm"})
    with pytest.raises(ValueError, match="only used with scheduler scheduler-plugins"):
        with_gang(DEEPSEEK, {"schedule_timeout_s": 30})


def test_doctor_warns_of_affinity_alone_and_checks_the_chosen_crd() -> None:
    plain = evaluate_gang(load_deployment(DEEPSEEK))
    assert plain.status == "warn" and "half-scheduled" in plain.summary
    assert evaluate_gang(load_deployment(KIMI)).status == "skip"
    gang = with_gang(DEEPSEEK, {"scheduler": "volcano"})
    assert evaluate_gang(gang).status == "pass"
    needed = {(kind_of(o).api_version, kind_of(o).plural) for o in render(gang)}
    served: dict[str, list[str]] = {"leaderworkerset.x-k8s.io/v1": ["leaderworkersets"]}
    by_name = {r.name: r for r in evaluate_crds(served, needed)}
    volcano = by_name["crds: Volcano PodGroup"]
    assert volcano.status == "fail" and "volcano" in (volcano.fix or "").lower()
    assert by_name["crds: coscheduling PodGroup (scheduler-plugins)"].status == "skip"
    served["scheduling.volcano.sh/v1beta1"] = ["podgroups"]
    assert {r.name: r for r in evaluate_crds(served, needed)}["crds: Volcano PodGroup"].status == "pass"
