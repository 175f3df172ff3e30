"""Every label key infctl puts on Kubernetes objects, and the label sets built from them.

The router, the autoscaler, ``infctl status`` and pruning select on these keys: change one here and every
selector follows. Values are DNS-label safe by construction (release names are validated DNS labels).
"""

from __future__ import annotations

NAME = "app.kubernetes.io/name"
"""The application: the engine's name for engines, ``infctl-router``, ``infctl-autoscaler``."""
INSTANCE = "app.kubernetes.io/instance"
"""The release (deployment profile name)."""
COMPONENT = "app.kubernetes.io/component"
"""engine, router, autoscaler, traffic or monitoring."""
PART_OF = "app.kubernetes.io/part-of"
MANAGED_BY = "app.kubernetes.io/managed-by"

RELEASE = "infctl.io/release"
"""The release; every object infctl applies carries it, and pruning selects on it."""
ROLE = "infctl.io/role"
"""prefill, decode or both."""
GROUP = "infctl.io/group"
"""PD group in group mode: ``g0``, ``g1``..."""
POOL = "infctl.io/pool"
"""Pool in pool mode: ``prefill`` or ``decode``."""
ENGINE = "infctl.io/engine"
"""The engine adapter's name."""
WORKLOAD = "infctl.io/workload"
"""The set of identical replicas a pod belongs to (``g0-prefill``, ``decode``, ``engine``); the immutable
part of a workload's selector."""

UPSTREAM = "infctl.io/upstream"
"""Upstream group of an engine's backends in the router (weighted splits, cutover); default ``default``."""
DP_SIZE = "infctl.io/data-parallel-size"
"""Data-parallel ranks an engine pod serves behind its HTTP port, as its engine resolves its command line
(``EngineAdapter.dp_ranks``); the router makes one backend per rank."""

SERVES = "infctl.io/serves"
"""``http`` on engine pods that serve the OpenAI API (Deployment pods, LeaderWorkerSet leaders); workers of
a multi-node replica lack it, so the router's discovery never picks them."""

DRAINING = "infctl.io/draining"
"""Annotation ``"true"`` on an engine pod the autoscaler is about to scale away: routers watching the pods
send it no new requests while its requests in flight finish (``infctl.autoscaler.kube_drain``)."""

AUTOSCALED = "infctl.io/autoscaled"
"""Annotation (not a label) on workloads whose replica count the autoscaler owns; apply leaves it alone."""

MANAGER = "infctl"
"""Value of ``app.kubernetes.io/managed-by`` and the server-side apply field manager."""
PART_OF_VALUE = "infctl"

Component = str


def release_labels(release: str, component: Component, name: str) -> dict[str, str]:
    """Labels every object of ``release`` carries."""
    return {
        NAME: name,
        INSTANCE: release,
        COMPONENT: component,
        PART_OF: PART_OF_VALUE,
        MANAGED_BY: MANAGER,
        RELEASE: release,
    }


def release_selector(release: str) -> str:
    """Label selector (``key=value,...``) matching every object infctl applied for ``release``."""
    return f"{RELEASE}={release},{MANAGED_BY}={MANAGER}"


def group_value(group: int) -> str:
    """The ``infctl.io/group`` value of group ``group``."""
    return f"g{group}"
