"""Which pods a scale-in removes, as the controllers choose them (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from infctl.autoscaler.kube_drain import LWS_GROUP, PodView, pod_view, victims
from infctl.manifests import labels as L


def raw(name: str, *, ready: bool = True, ip: str | None = "10.0.0.1", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {L.SERVES: "http", **labels}},
        "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 30000}]}]},
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_a_pod_view_reads_its_engine_url_readiness_and_group() -> None:
    assert pod_view(raw("a")) == PodView("a", "http://10.0.0.1:30000", True)
    assert pod_view(raw("b", ip="fd00::7")).url == "http://[fd00::7]:30000"
    assert pod_view(raw("c", ready=False, **{LWS_GROUP: "3"})) == PodView(
        "c", "http://10.0.0.1:30000", False, 3
    )
    worker = raw("d")
    del worker["metadata"]["labels"][L.SERVES]
    assert pod_view(worker).url is None
    gone = raw("e")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not pod_view(gone).ready


def test_a_deployment_loses_unready_pods_then_the_least_busy() -> None:
    pods = [
        PodView("a", "u", True),
        PodView("b", "u", True),
        PodView("c", "u", False),
        PodView("d", "u", True),
    ]
    busy = {"a": 5, "b": 0, "d": 2}
    assert [p.name for p in victims("Deployment", pods, 2, busy)] == ["c", "b"]
    assert [p.name for p in victims("Deployment", pods, 1, {"a": 5, "b": 9})] == ["c", "a", "b"]  # d unknown
    assert victims("Deployment", pods, 4, busy) == []


def test_a_leaderworkerset_loses_its_highest_groups() -> None:
    leaders = [PodView(f"l{i}", "u", True, i) for i in (2, 0, 3, 1)]
    assert [p.name for p in victims("LeaderWorkerSet", leaders, 2)] == ["l2", "l3"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9)), min_size=1, max_size=8), st.integers(0, 8))
def test_exactly_the_excess_goes_and_no_ready_pod_before_an_unready_one(
    pods: list[tuple[bool, int]], desired: int
) -> None:
    views = [PodView(f"p{i}", "u", ready) for i, (ready, _) in enumerate(pods)]
    busy = {f"p{i}": float(b) for i, (_, b) in enumerate(pods)}
    chosen = victims("Deployment", views, desired, busy)
    assert len(chosen) == max(0, len(views) - desired)
    kept = [p for p in views if p not in chosen]
    if any(p.ready for p in chosen) and kept:
        assert all(p.ready for p in kept)
        assert max(busy[p.name] for p in chosen if p.ready) <= min(busy[p.name] for p in kept)
