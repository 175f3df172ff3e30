"""Where a pod of a PD-group set (``infctl.manifests.group_set``) sits: its role, PD group and whether it
serves HTTP, from the layout annotation the set renders and the labels LeaderWorkerSet gives each pod.

Light on purpose (the labels module only): the router's discovery reads it for every pod it sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infctl.manifests import labels as L

LAYOUT = "infctl.io/group-layout"
"""Pod annotation of a PD-group set: ``prefill=P,decode=D,nodes=n``."""
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
"""Pod label: the pod's index in its LWS group (0: the leader)."""
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
"""Pod label: the LWS group (here: the PD group) the pod belongs to."""


@dataclass(frozen=True)
class Member:
    """What a pod of a PD-group set is: its role, its PD group, and whether it serves HTTP (rank 0)."""

    role: str
    group: str
    serves: bool


def layout_value(prefill: int, decode: int, nodes: int) -> str:
    return f"prefill={prefill},decode={decode},nodes={nodes}"


def member_of(keys: Mapping[str, str]) -> Member | None:
    """A pod's place in its PD-group set from its :data:`LAYOUT` annotation and LWS labels; None when the
    pod carries no layout or an unreadable one."""
    try:
        layout = dict(part.split("=", 1) for part in keys[LAYOUT].split(","))
        prefill, nodes = int(layout["prefill"]), int(layout["nodes"])
        index, group = int(keys[LWS_WORKER_INDEX]), int(keys[LWS_GROUP_INDEX])
    except (KeyError, ValueError):
        return None
    if nodes < 1:
        return None
    pool = keys.get(L.POOL)
    name = f"g{group}" if pool is None else f"{pool}-g{group}"
    role = "prefill" if index // nodes < prefill else "decode"
    return Member(role, name, index % nodes == 0)
