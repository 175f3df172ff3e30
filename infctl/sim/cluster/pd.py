"""Prefill/decode disaggregation in the cluster simulator: the fleet's PD layout and the KV link model.

A layout is ``groups`` copies of ``xP+yD`` (x prefill and y decode engines behind one switch). The live
router's ``RouterCore.route_pd`` pairs them (``mode`` group: both halves from one group; pool: each half on
its own). A disaggregated request runs as the live vLLM connector protocol does: a prefill leg
(``max_tokens`` 1) on the prefill engine, then the decode leg on the decode engine, which allocates the
prompt's blocks, pulls the KV it does not already cache over the link, and decodes. TTFT = prefill +
transfer + the first decode step.

The link: ``uncached tokens * kv_bytes_per_token / bandwidth`` from the moment the decode engine allocated
the blocks. A pair inside one group uses ``intra_group_gbps``; a pair across groups (pool mode) crosses the
spine and gets ``cross_group_gbps``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from infctl.errors import ConfigError
from infctl.router.policies.pd import PDSettings
from infctl.sim.profiles import SimProfile
from infctl.sim.scheduler import Role

_LAYOUT = re.compile(r"^\s*(\d+)\s*P\s*\+?\s*(\d+)\s*D\s*$", re.IGNORECASE)

CROSS_GROUP_SHARE = 0.5
"""Share of the group link a cross-group transfer gets when ``cross_group_gbps`` is not given: a 2:1
oversubscribed leaf-spine fabric (REFERENCE.md gives no figure; the group link is the profile's NIC)."""


@dataclass(frozen=True)
class PDLayout:
    """A disaggregated fleet: ``groups`` x (``prefill`` P + ``decode`` D) engines."""

    prefill: int = 1
    """Prefill engines per group."""
    decode: int = 1
    """Decode engines per group."""
    groups: int = 1
    """Groups (one switch each); engines ``g0-p0, g0-d0, g1-p0...``."""
    mode: Literal["group", "pool"] = "group"
    """``group``: the router pairs inside one group (fast link); ``pool``: any prefill with any decode."""
    min_uncached_tokens: int = PDSettings().min_uncached_tokens
    """The router disaggregates only when more prompt tokens than this are uncached on the decode engine;
    shorter ones prefill on the decode engine itself (tokens; the live router's default)."""
    intra_group_gbps: float | None = None
    """KV link inside a group, GB/s (1e9 bytes/s). None: the profile's ``kv_transfer_gbps`` (its NIC:
    25 GB/s for llama3-8b-h100, one 200 Gb/s RoCE NIC; 50 GB/s for the DeepSeek-V3 nodes)."""
    cross_group_gbps: float | None = None
    """KV link between groups (through the spine), GB/s. None: ``CROSS_GROUP_SHARE`` of the group link."""

    def __post_init__(self) -> None:
        if self.prefill < 1 or self.decode < 1 or self.groups < 1:
            raise ConfigError(
                f"pd layout {self.prefill}P{self.decode}D x {self.groups}: each count must be >= 1",
                hint="e.g. --pd 1P1D --pd-groups 4",
            )
        if self.mode not in ("group", "pool"):
            raise ConfigError(f"pd mode must be group or pool, got {self.mode!r}", hint="--pd-mode group")
        if self.min_uncached_tokens < 0:
            raise ConfigError("pd min_uncached_tokens must be >= 0")
        for name in ("intra_group_gbps", "cross_group_gbps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"pd {name} must be > 0 GB/s, got {value}")

    @property
    def size(self) -> int:
        """Engines in the fleet."""
        return self.groups * (self.prefill + self.decode)

    @property
    def router_settings(self) -> PDSettings:
        """What the live router takes (``--pd-mode``, ``--pd-min-uncached-tokens``)."""
        return PDSettings(mode=self.mode, min_uncached_tokens=self.min_uncached_tokens)

    def engines(self) -> list[tuple[str, Role, str]]:
        """(engine id, role, group) of every engine, group by group, prefill engines first."""
        out: list[tuple[str, Role, str]] = []
        for g in range(self.groups):
            out += [(f"g{g}-p{i}", "prefill", f"g{g}") for i in range(self.prefill)]
            out += [(f"g{g}-d{i}", "decode", f"g{g}") for i in range(self.decode)]
        return out

    def link_gbps(self, profile: SimProfile, prefill_group: str | None, decode_group: str | None) -> float:
        """Bandwidth of a KV transfer between engines of these groups, GB/s."""
        intra = self.intra_group_gbps or profile.kv_transfer_gbps
        if prefill_group == decode_group:
            return intra
        return self.cross_group_gbps or intra * CROSS_GROUP_SHARE


def parse_layout(
    text: str, *, groups: int = 1, mode: str = "group", min_uncached_tokens: int | None = None
) -> PDLayout:
    """``"1P1D"``, ``"2P+1D"`` (case-insensitive) -> :class:`PDLayout`; ConfigError names the fix."""
    m = _LAYOUT.match(text)
    if m is None:
        raise ConfigError(f"--pd {text!r}: expected xPyD, e.g. 1P1D or 2P+1D", hint="e.g. --pd 1P1D")
    if mode not in ("group", "pool"):
        raise ConfigError(f"--pd-mode {mode!r}: expected group or pool", hint="--pd-mode group")
    extra = {} if min_uncached_tokens is None else {"min_uncached_tokens": min_uncached_tokens}
    return PDLayout(int(m[1]), int(m[2]), groups, mode, **extra)  # type: ignore[arg-type]


def transfer_seconds(tokens: int, kv_bytes_per_token: int, gbps: float) -> float:
    """Seconds to move ``tokens`` tokens of KV over a ``gbps`` GB/s link (the engine core's own formula)."""
    return tokens * kv_bytes_per_token / (gbps * 1e9)
