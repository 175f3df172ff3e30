"""Placement: a PD group never spans switches, oversize groups are refused, pools scale per role."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from infctl.config import DeploymentProfile
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.placement import check_group_fits, nodes_for, plan_placement

SWITCH = "network.topology.nvidia.com/block"


def profile(
    mode: str = "group",
    *,
    groups: int = 2,
    prefill: int = 1,
    decode: int = 2,
    tp: int = 8,
    dp: int = 1,
    gpus_per_node: int = 8,
    nodes_per_switch: int | None = 16,
) -> DeploymentProfile:
    data: dict[str, Any] = {
        "name": "demo",
        "mode": mode,
        "model": {
            "engine": "vllm",
            "model": "m",
            "tensor_parallel_size": tp,
            "data_parallel_size": dp,
            "pd": {"kv_connector": "nixl"},
        },
        "cluster": {
            "name": "c",
            "switch_label": SWITCH,
            "gpus_per_node": gpus_per_node,
            "nodes_per_switch": nodes_per_switch,
        },
    }
    if mode == "group":
        data |= {"groups": groups, "group": {"prefill": prefill, "decode": decode}}
    elif mode == "pool":
        data |= {"pools": {"prefill": prefill, "decode": decode}}
    else:
        data |= {"replicas": groups}
        del data["model"]["pd"]
    return DeploymentProfile.model_validate(data)


def schedule(plan: Any, switches: int, nodes_per_switch: int, gpus_per_node: int) -> dict[str, set[int]]:
    """A toy scheduler honouring required pod affinity: returns group -> switches its pods landed on."""
    free = [[gpus_per_node] * nodes_per_switch for _ in range(switches)]
    placed: dict[str, set[int]] = {}
    for w in plan.workloads:
        terms = (
            (w.affinity or {})
            .get("podAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", [])
        )
        for _ in range(w.replicas * w.nodes_per_replica):
            group = w.pod_labels.get(L.GROUP)
            # Preferred anti-affinity: a group's first pod goes to a switch no other group uses, if any.
            taken = {s for g, ss in placed.items() if g != group for s in ss}
            allowed = sorted(range(switches), key=lambda s: s in taken)
            if terms:
                assert terms[0]["topologyKey"] == SWITCH
                selected = terms[0]["labelSelector"]["matchLabels"][L.GROUP]
                if placed.get(selected):  # the first pod of a group may go anywhere; the rest follow it
                    allowed = sorted(placed[selected])
            for s in allowed:
                node = next((i for i, g in enumerate(free[s]) if g >= w.gpus_per_pod), None)
                if node is not None:
                    free[s][node] -= w.gpus_per_pod
                    placed.setdefault(group or w.workload, set()).add(s)
                    break
            else:
                placed.setdefault(f"pending:{group}", set()).add(-1)
    return placed


@settings(max_examples=150, deadline=None)
@given(
    groups=st.integers(1, 4),
    prefill=st.integers(1, 4),
    decode=st.integers(1, 6),
    tp=st.sampled_from([1, 2, 4, 8]),
    dp=st.sampled_from([1, 2, 4]),
    nodes_per_switch=st.integers(1, 24),
)
def test_group_pinned_to_one_switch_or_refused(
    groups: int, prefill: int, decode: int, tp: int, dp: int, nodes_per_switch: int
) -> None:
    gpus = tp * dp
    assume(gpus <= 8 or gpus % 8 == 0)
    p = profile(
        groups=groups, prefill=prefill, decode=decode, tp=tp, dp=dp, nodes_per_switch=nodes_per_switch
    )
    needed = nodes_for(prefill + decode, gpus, 8)
    if needed > nodes_per_switch:
        with pytest.raises(ConfigError, match="under one switch"):
            plan_placement(p)
        return
    plan = plan_placement(p)
    assert plan.nodes_per_group == needed
    assert plan.replicas_by_role() == p.replicas_by_role()
    for w in plan.workloads:
        assert w.pod_labels[L.GROUP] == w.group
        own = w.affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert own == [
            {
                "labelSelector": {"matchLabels": {L.RELEASE: "demo", L.GROUP: w.group}},
                "topologyKey": SWITCH,
            }
        ]
    landed = schedule(plan, switches=groups, nodes_per_switch=nodes_per_switch, gpus_per_node=8)
    for group, switches in landed.items():
        assert not group.startswith("pending"), landed
        assert len(switches) == 1, f"group {group} split over switches {switches}"


def test_groups_repel_preferred_by_default_and_required_on_request() -> None:
    preferred = plan_placement(profile()).workloads[0].affinity
    assert "preferredDuringSchedulingIgnoredDuringExecution" in preferred["podAntiAffinity"]
    term = preferred["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "podAffinityTerm"
    ]
    assert term["topologyKey"] == SWITCH
    assert {"key": L.GROUP, "operator": "NotIn", "values": ["g0"]} in term["labelSelector"][
        "matchExpressions"
    ]
    required = plan_placement(profile(), anti_affinity="required").workloads[0].affinity
    assert list(required["podAntiAffinity"]) == ["requiredDuringSchedulingIgnoredDuringExecution"]


def test_oversize_group_refused_with_numbers_and_a_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        plan_placement(profile(prefill=4, decode=8, tp=8, dp=2, nodes_per_switch=16))
    assert "needs 24 nodes (192 GPUs)" in err.value.message
    assert "16 nodes x 8 GPUs = 128 GPUs" in err.value.message
    assert err.value.hint is not None and "group: {prefill:" in err.value.hint


def test_unknown_switch_size_skips_the_check() -> None:
    assert check_group_fits(profile(prefill=40, decode=40, nodes_per_switch=None)) == 80


@given(prefill=st.integers(1, 8), decode=st.integers(1, 8), dp=st.sampled_from([1, 2, 4]))
def test_pool_mode_one_scale_target_per_role(prefill: int, decode: int, dp: int) -> None:
    plan = plan_placement(profile("pool", prefill=prefill, decode=decode, dp=dp))
    assert [(w.workload, w.replicas) for w in plan.workloads] == [("prefill", prefill), ("decode", decode)]
    for w in plan.workloads:
        assert w.affinity is None
        assert w.pod_labels[L.POOL] == w.role and w.pod_labels[L.ROLE] == w.role
        assert w.nodes_per_replica == math.ceil(8 * dp / 8)


def test_replica_smaller_than_a_node_packs() -> None:
    assert nodes_for(5, 2, 8) == 2
    assert nodes_for(3, 16, 8) == 6


@pytest.mark.parametrize("dp", [1, 2, 4])
def test_dp_pods_carry_the_rank_count_discovery_reads(dp: int) -> None:
    """Discovery makes one backend per rank from exactly the labels placement puts on the pod."""
    from infctl.router.discovery import DiscoverySettings, targets_from_pod

    for w in plan_placement(profile("pool", dp=dp)).workloads:
        assert w.pod_labels.get(L.DP_SIZE) == (str(dp) if dp > 1 else None)
        pod = {
            "metadata": {"labels": {**w.pod_labels, L.SERVES: "http"}},
            "status": {"podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        found = targets_from_pod(pod, DiscoverySettings(namespace="ns", selector="a=b"))
        assert found is not None and found.problems == ()
        assert [b.dp_rank for b in found.backends] == (list(range(dp)) if dp > 1 else [None])
        assert {b.role for b in found.backends} == {w.role}


def test_dp_pods_carry_the_rank_count_their_engine_resolves() -> None:
    """The label is the engine's count, not the profile's field: SGLang takes the last ``--dp-size`` (a
    profile's extra_args come last) and an SGLang PD prefill's bootstrap rooms are drawn modulo the label."""
    base = profile("pool", dp=2)
    assert base.model.pd is not None
    pd = base.model.pd.model_copy(update={"kv_connector": None, "transfer_backend": "mooncake"})
    model = base.model.model_copy(update={"engine": "sglang", "pd": pd, "extra_args": ["--dp-size", "4"]})
    workloads = plan_placement(base.model_copy(update={"model": model})).workloads
    assert workloads
    for w in workloads:
        assert w.pod_labels[L.DP_SIZE] == "4", w.workload
