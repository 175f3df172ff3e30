"""From a deployment profile to the policy's units and settings (pure).

Units per mode: ``both`` (aggregated), ``prefill`` and ``decode`` (pool), ``group`` (group mode: a whole
PD group of ``group.prefill`` + ``group.decode`` replicas); aggregated engines in length pools: one unit
per pool, named after it. A role without bounds stays at its deployed
count. In group mode the ``autoscaler.prefill``/``decode`` bounds count replicas of that role over all
groups, and the group count is bounded so that every role stays inside its own bounds.

:class:`Layout` is the part of a profile the autoscaler needs; it travels as JSON on the command line of a
locally supervised autoscaler, which has no profile file to read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.config import AutoscalerSettings, DeploymentProfile, Mode, ScaleBounds
from infctl.config.scale_to_zero import hold_when_empty_s
from infctl.errors import ConfigError


class PoolUnit(NamedTuple):
    """An aggregated length pool as one unit (a JSON array in ``Layout.to_json``)."""

    name: str
    deployed: int
    min: int | None
    """None (with ``max``): fixed at ``deployed``."""
    max: int | None
    zero_after_s: float | None
    """Its scale-to-zero window, else None."""


@dataclass(frozen=True)
class Layout:
    """A deployment's shape and autoscaler settings."""

    release: str
    mode: Mode
    engine: str
    settings: AutoscalerSettings
    replicas: int = 1
    """Aggregated mode: deployed replicas."""
    pools: tuple[int, int] = (1, 1)
    """Pool mode: deployed (prefill, decode) replicas."""
    groups: int = 1
    """Group mode: deployed groups."""
    per_group: tuple[int, int] = (1, 1)
    """Group mode: (prefill, decode) replicas per group."""
    length_pools: tuple[PoolUnit, ...] = ()
    """Aggregated length pools, one unit each."""
    hold_when_empty_s: float | None = None
    """The router's hold while a unit is at 0 (``infctl.config.scale_to_zero.hold_when_empty_s``)."""

    @classmethod
    def from_profile(cls, profile: DeploymentProfile) -> Layout:
        return cls(
            release=profile.name,
            mode=profile.mode,
            engine=profile.model.engine,
            settings=profile.autoscaler,
            replicas=profile.replicas,
            pools=(profile.pools.prefill, profile.pools.decode) if profile.pools else (1, 1),
            groups=profile.groups,
            per_group=(profile.group.prefill, profile.group.decode) if profile.group else (1, 1),
            length_pools=_length_pools(profile),
            hold_when_empty_s=hold_when_empty_s(profile),
        )

    def to_json(self) -> str:
        data: dict[str, Any] = {**self.__dict__, "settings": self.settings.model_dump(mode="json")}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Layout:
        try:
            data = json.loads(text)
            data["settings"] = AutoscalerSettings.model_validate(data["settings"])
            data["pools"], data["per_group"] = tuple(data["pools"]), tuple(data["per_group"])
            data["length_pools"] = tuple(PoolUnit(*p) for p in data.get("length_pools", ()))
            return cls(**data)
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"--layout: not a layout: {err}") from None


def unit_configs(layout: Layout) -> tuple[UnitConfig, ...]:
    """The units the policy moves, with bounds (a role without bounds is pinned at its deployed count)."""
    s = layout.settings
    if layout.mode == "aggregated" and layout.length_pools:
        return tuple(
            UnitConfig(name, deployed, deployed, pool=name)
            if lo is None or hi is None
            else UnitConfig(name, lo, hi, pool=name, scale_to_zero_after_s=zero if lo == 0 else None)
            for name, deployed, lo, hi, zero in layout.length_pools
        )
    if layout.mode == "aggregated":
        zero = s.scale_to_zero.after_s if s.scale_to_zero is not None else None
        return (_unit("both", s.both, layout.replicas, (("both", 1),), zero),)
    if layout.mode == "pool":
        return (
            _unit("prefill", s.prefill, layout.pools[0], (("prefill", 1),)),
            _unit("decode", s.decode, layout.pools[1], (("decode", 1),)),
        )
    members = (("prefill", layout.per_group[0]), ("decode", layout.per_group[1]))
    lo, hi = 1, math.inf
    bounded = [(b, n) for b, (_, n) in zip((s.prefill, s.decode), members, strict=True) if b is not None]
    if not bounded:
        return (UnitConfig("group", layout.groups, layout.groups, members),)
    for bounds, per_group in bounded:
        lo, hi = max(lo, math.ceil(bounds.min / per_group)), min(hi, bounds.max // per_group)
    if hi < lo:
        raise ConfigError(
            f"autoscaler: no group count keeps prefill and decode within their bounds "
            f"({layout.per_group[0]} prefill + {layout.per_group[1]} decode per group)",
            hint="in group mode autoscaler.prefill/decode bound the replicas of all groups together",
        )
    return (UnitConfig("group", lo, int(hi), members),)


def initial_counts(layout: Layout) -> dict[str, int]:
    """Units as deployed."""
    if layout.mode == "aggregated" and layout.length_pools:
        return {name: deployed for name, deployed, *_ in layout.length_pools}
    if layout.mode == "aggregated":
        return {"both": layout.replicas}
    if layout.mode == "pool":
        return {"prefill": layout.pools[0], "decode": layout.pools[1]}
    return {"group": layout.groups}


def _length_pools(profile: DeploymentProfile) -> tuple[PoolUnit, ...]:
    """Aggregated length pools as :attr:`Layout.length_pools` (PD length pools are not scaled per pool)."""
    if profile.mode != "aggregated" or profile.length_pools is None:
        return ()
    out = []
    for p in profile.length_pools:
        b = p.bounds("both")
        zero = p.autoscaler.scale_to_zero if p.autoscaler is not None else None
        window = zero.after_s if zero is not None else None
        out.append(
            PoolUnit(
                p.name, p.replicas or 0, None if b is None else b.min, None if b is None else b.max, window
            )
        )
    return tuple(out)


def policy_config(layout: Layout, **extra: Any) -> PolicyConfig:
    """The policy for ``layout``: the profile's thresholds, plus ``extra`` PolicyConfig fields (CLI flags)."""
    s = layout.settings
    return PolicyConfig(
        units=unit_configs(layout),
        queue_up=s.queue_per_replica.up,
        queue_down=s.queue_per_replica.down,
        kv_up=s.kv_usage.up,
        kv_down=s.kv_usage.down,
        **extra,
    )


def _unit(
    name: str,
    bounds: ScaleBounds | None,
    deployed: int,
    members: tuple[tuple[str, int], ...],
    zero_after_s: float | None = None,
) -> UnitConfig:
    """``zero_after_s``: the section's scale-to-zero window, for bounds with ``min`` 0 (the profile's
    validator allows those in aggregated mode only)."""
    if bounds is None:
        return UnitConfig(name, deployed, deployed, members)
    idle = zero_after_s if bounds.min == 0 else None
    return UnitConfig(name, bounds.min, bounds.max, members, scale_to_zero_after_s=idle)
