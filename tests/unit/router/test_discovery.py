from typing import Any

from infctl.router.discovery import DiscoverySettings, backend_from_pod, reconcile

S = DiscoverySettings(namespace="ns", selector="a=b", port=8000, engine="vllm")


def pod(name: str, ip: str | None = "10.0.0.1", ready: bool = True, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"containers": [{"name": "engine", "ports": [{"name": "http", "containerPort": 8100}]}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_ready_pod_becomes_a_backend_with_its_labels() -> None:
    p = pod("p", **{"infctl.io/role": "prefill", "infctl.io/group": "g1", "infctl.io/engine": "sglang"})
    b = backend_from_pod(p, S)
    assert b is not None
    assert (b.id, b.role, b.group, b.engine) == ("http://10.0.0.1:8100", "prefill", "g1", "sglang")


def test_unready_unscheduled_or_terminating_pods_are_not_backends() -> None:
    assert backend_from_pod(pod("p", ready=False), S) is None
    assert backend_from_pod(pod("p", ip=None), S) is None
    terminating = pod("p")
    terminating["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    assert backend_from_pod(terminating, S) is None


def test_unknown_role_label_falls_back_to_both_and_default_port() -> None:
    p = pod("p", **{"infctl.io/role": "leader"})
    p["spec"]["containers"][0]["ports"] = []
    b = backend_from_pod(p, S)
    assert b is not None and b.role == "both" and b.url == "http://10.0.0.1:8000" and b.engine == "vllm"


def test_reconcile_drops_what_is_gone_and_keeps_what_is_ready() -> None:
    known = {"ns/a": "http://10.0.0.1:8100", "ns/b": "http://10.0.0.2:8100"}
    want, drop = reconcile(known, [pod("a", ip="10.0.0.1"), pod("c", ip="10.0.0.3")], S)
    assert sorted(want) == ["ns/a", "ns/c"]
    assert drop == ["http://10.0.0.2:8100"]
