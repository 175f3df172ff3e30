"""Plain views of Kubernetes Node objects: allocatable resources, labels, schedulability (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
COMMON_SWITCH_LABELS = (
    "network.topology.nvidia.com/block",
    "cloud.google.com/gce-topology-block",
    "topology.k8s.aws/network-node-layer-3",
    "topology.kubernetes.io/zone",
)
"""Labels clusters commonly carry that name a switch, block or zone (REFERENCE.md section 6)."""


def quantity(raw: object) -> float:
    """A resource quantity (``8``, ``1k``, ``500m``) as a number; 0 when unreadable."""
    m = _QUANTITY.match(str(raw).strip())
    if m is None or m.group(2) not in _SUFFIX:
        return 0.0
    try:
        return float(m.group(1)) * _SUFFIX[m.group(2)]
    except ValueError:
        return 0.0


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, float]
    schedulable: bool

    def count(self, resource: str) -> int:
        return int(self.allocatable.get(resource, 0.0))


def node_views(items: Sequence[Mapping[str, Any]]) -> list[NodeView]:
    out = []
    for item in items:
        meta, spec, status = item.get("metadata", {}), item.get("spec", {}), item.get("status", {})
        alloc = {str(k): quantity(v) for k, v in (status.get("allocatable") or {}).items()}
        out.append(
            NodeView(
                str(meta.get("name", "?")),
                dict(meta.get("labels") or {}),
                alloc,
                not spec.get("unschedulable", False),
            )
        )
    return out


def gpu_nodes(nodes: Sequence[NodeView], resource: str, selector: Mapping[str, str]) -> list[NodeView]:
    """Schedulable nodes advertising ``resource`` and carrying every ``selector`` label."""
    return [
        n
        for n in nodes
        if n.schedulable and n.count(resource) > 0 and all(n.labels.get(k) == v for k, v in selector.items())
    ]


def gpu_like_resources(nodes: Sequence[NodeView]) -> list[str]:
    """Extended resources whose name mentions a GPU (a hint when the profile names another)."""
    return sorted({r for n in nodes for r in n.allocatable if "gpu" in r.lower() and "/" in r})


def names(nodes: Sequence[NodeView], limit: int = 5) -> str:
    shown = ", ".join(n.name for n in nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")
