"""Pure verdict on a release's engine pods: running and ready, or why not (the scheduler's own words)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.manifests import labels

G: Group = "cluster"


def engine_selector(release: str) -> str:
    return f"{labels.RELEASE}={release},{labels.COMPONENT}=engine"


def _why(pod: Mapping[str, Any]) -> str | None:
    """None when the pod is ready; else its phase and the first condition or container state explaining it."""
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
    if (conditions.get("Ready") or {}).get("status") == "True":
        return None
    for kind in ("PodScheduled", "ContainersReady", "Ready"):
        c = conditions.get(kind) or {}
        if c.get("status") == "False" and (c.get("message") or c.get("reason")):
            return f"{status.get('phase', '?')}: {c.get('message') or c.get('reason')}"
    for cs in status.get("containerStatuses") or ():
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return f"{status.get('phase', '?')}: {waiting['reason']} {waiting.get('message', '')}".strip()
    return str(status.get("phase", "not ready"))


def evaluate_engine_pods(
    pods: Sequence[Mapping[str, Any]], release: str, namespace: str, *, target: str = ""
) -> CheckResult:
    """Every engine pod of ``release`` is ready; the ones that are not are listed with the reason."""
    mine = [p for p in pods if (p.get("metadata") or {}).get("labels", {}).get(labels.RELEASE) == release]
    if not mine:
        return skipped(G, "engine pods", f"no engine pod of {release} in {namespace}", target=target)
    waiting = [(str((p.get("metadata") or {}).get("name")), why) for p in mine if (why := _why(p))]
    if not waiting:
        return passed(G, "engine pods", f"{len(mine)} ready in {namespace}", target=target)
    listed = "; ".join(f"{name}: {why}" for name, why in waiting[:4])
    more = f" (and {len(waiting) - 4} more)" if len(waiting) > 4 else ""
    fix = f"kubectl -n {namespace} describe pod {waiting[0][0]}"
    unschedulable = any("Insufficient" in why or "didn't match" in why for _, why in waiting)
    if unschedulable:
        fix = "the scheduler cannot place them: see gpu nodes, switch label and switch capacity above; " + fix
    make = failed if len(waiting) == len(mine) else warned
    summary = f"{len(waiting)} of {len(mine)} not ready: {listed}{more}"
    return make(G, "engine pods", summary, fix, target=target)
