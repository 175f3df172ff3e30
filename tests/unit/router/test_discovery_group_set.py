"""Discovery of a PD-group set's pods (``cluster.gang.scheduler`` lws or kueue): one pod template serves every
engine of a group, so a pod's role and PD group come from the rendered layout and LeaderWorkerSet's own
labels; ranks other than a replica's rank 0 serve no HTTP and are no backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infctl.config import load_deployment
from infctl.manifests import labels as L
from infctl.manifests.group_layout import LWS_GROUP_INDEX, LWS_WORKER_INDEX
from infctl.manifests.render import render
from infctl.router.discovery import DiscoverySettings, targets_from_pod

S = DiscoverySettings(namespace="inference", selector="a=b", port=8000, engine="sglang")
PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "deepseek-v3-group.yaml"


def rendered_set_pods() -> dict[int, dict[str, Any]]:
    """The metadata LWS gives group 1's pods, built on the rendered templates (leader 0, workers 1..5)."""
    profile = load_deployment(PROFILE)
    assert profile.cluster is not None
    cluster = profile.cluster.model_validate(
        {**profile.cluster.model_dump(exclude_unset=True), "gang": {"scheduler": "lws"}}
    )
    lws = next(
        o for o in render(profile.model_copy(update={"cluster": cluster})) if o["kind"] == "LeaderWorkerSet"
    )
    t = lws["spec"]["leaderWorkerTemplate"]
    pods = {}
    for index in range(t["size"]):
        tpl = t["leaderTemplate"] if index == 0 else t["workerTemplate"]
        labels = {**tpl["metadata"]["labels"], LWS_WORKER_INDEX: str(index), LWS_GROUP_INDEX: "1"}
        pods[index] = {
            "metadata": {
                "name": f"p{index}",
                "labels": labels,
                "annotations": tpl["metadata"]["annotations"],
            },
            "spec": {"containers": tpl["spec"]["containers"]},
            "status": {
                "phase": "Running",
                "podIP": f"10.0.0.{index + 1}",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    return pods


def test_every_replica_rank0_is_a_backend_with_its_role_and_group() -> None:
    found = {i: targets_from_pod(p, S) for i, p in rendered_set_pods().items()}
    # 1 prefill + 2 decode replicas of 2 nodes: pods 0, 2, 4 serve; 1, 3, 5 are ranks behind them.
    assert [i for i, t in found.items() if t is None] == [1, 3, 5]
    served = {i: t.backends[0] for i, t in found.items() if t is not None}
    assert {i: (b.role, b.group) for i, b in served.items()} == {
        0: ("prefill", "g1"),
        2: ("decode", "g1"),
        4: ("decode", "g1"),
    }
    assert all(t.problems == () for t in found.values() if t is not None)
    # The prefill carries its bootstrap port; data-parallel ranks become backends as for any pod.
    assert served[0].bootstrap_port == 8998
    assert len(found[0].backends) == 2  # type: ignore[union-attr]


def test_a_set_pod_of_a_length_pool_is_in_that_pools_group() -> None:
    pod = rendered_set_pods()[4]
    pod["metadata"]["labels"][L.POOL] = "long"
    t = targets_from_pod(pod, S)
    assert t is not None and t.backends[0].group == "long-g1" and t.backends[0].pool == "long"


def test_an_unreadable_layout_is_reported_and_the_labels_used() -> None:
    pod = rendered_set_pods()[2]
    del pod["metadata"]["labels"][LWS_WORKER_INDEX]
    t = targets_from_pod(pod, S)
    assert t is not None and t.backends[0].role == "both"
    assert any("group-layout" in p for p in t.problems)
