"""The router's decision core: snapshots, prefix indexes and policies, all free of I/O.

The HTTP server and proxy (later) build a :class:`Snapshot` per request and ask a :class:`RouterCore`.
"""

from infctl.router.core import RouterCore
from infctl.router.errors import NoBackendError
from infctl.router.kv_index import ApplyResult, KVIndex
from infctl.router.policies import (
    PRESETS,
    Decision,
    PDDecision,
    PDSettings,
    Policy,
    PolicyState,
    build_policy,
    pick_pd,
)
from infctl.router.prefix_index import ApproxPrefixIndex, capacity_entries
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Backend, BackendState, RequestInfo, Snapshot

__all__ = [
    "PRESETS",
    "ApplyResult",
    "ApproxPrefixIndex",
    "Backend",
    "BackendState",
    "Decision",
    "KVIndex",
    "NoBackendError",
    "PDDecision",
    "PDSettings",
    "Policy",
    "PolicySettings",
    "PolicyState",
    "RequestInfo",
    "RouterCore",
    "Snapshot",
    "build_policy",
    "capacity_entries",
    "pick_pd",
]
