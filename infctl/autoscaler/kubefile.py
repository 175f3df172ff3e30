"""The autoscaler file ``infctl render`` puts in the autoscaler's ConfigMap (``/etc/infctl/autoscaler.yaml``).

One unit per target (named after the workload), scaled through its ``/scale`` subresource::

    release: kimi-k2
    namespace: inference
    engine: vllm
    router_url: http://kimi-k2-router.inference.svc:8000
    targets:
    - {kind: LeaderWorkerSet, name: kimi-k2-prefill, role: prefill, min: 1, max: 4}
    - {kind: LeaderWorkerSet, name: kimi-k2-decode, role: decode, min: 2, max: 8}
    queue_per_replica: {up: 8.0, down: 1.0}
    kv_usage: {up: 0.85, down: 0.4}
    interval_s: 30.0
    dry_run: true

A target may carry ``group`` (its replicas belong to that PD group only), ``pool`` (to that length pool
only), and ``role: group`` with
``members: {prefill: P, decode: D}`` for a workload whose replicas are whole groups (an LWS of groups, an
RBG scaling adapter). ``prometheus`` (a URL) and ``drain_timeout_s`` (seconds a scale-in waits for the
requests of the pods it removes) are optional, and so are infctl's forecast and a GPU budget
shared by the targets (each target's ``gpus`` per unit)::

    forecast: {replica_prompt_tps: 70000, headroom: 0.5, lead_s: 105}
    gpu_budget: 64

With a target at ``min: 0``, ``hold_when_empty_s`` is the router's hold, which its replicas' measured
start-ups are checked against (:mod:`infctl.autoscaler.startup`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from pydantic import ValidationError

from infctl.autoscaler.kube import KubeTarget
from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.config._base import format_loc
from infctl.config.autoscaler import AutoscalerFile
from infctl.errors import ConfigError


@dataclass(frozen=True)
class KubeFile:
    """The file (validated by :class:`~infctl.config.autoscaler.AutoscalerFile`, which holds every default)
    as the daemon uses it: its targets as scale targets and policy units."""

    file: AutoscalerFile
    targets: tuple[KubeTarget, ...]
    units: tuple[UnitConfig, ...]
    forecast: ForecastConfig | None = None

    def policy(self, **extra: Any) -> PolicyConfig:
        f = self.file
        thresholds = {
            "queue_up": f.queue_per_replica.up,
            "queue_down": f.queue_per_replica.down,
            "kv_up": f.kv_usage.up,
            "kv_down": f.kv_usage.down,
        }
        planned = {"forecast": self.forecast, "gpu_budget": f.gpu_budget}
        return PolicyConfig(units=self.units, **{**thresholds, **planned, **extra})


def is_kube_file(data: Any) -> bool:
    return isinstance(data, dict) and "targets" in data


def parse_kube_file(data: dict[str, Any], source: str) -> KubeFile:
    """The file's contents; ConfigError naming ``source`` and the key path on a mistake."""
    try:
        f = AutoscalerFile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = format_loc(tuple(p for p in first["loc"] if not str(p).startswith("function-")))
        raise ConfigError(f"{source}: {where}: {first['msg']}", hint="render it: `infctl render`") from None
    targets = tuple(KubeTarget(unit=t.name, kind=t.kind, name=t.name) for t in f.targets)
    units = tuple(
        UnitConfig(
            t.name,
            t.min,
            t.max,
            tuple(t.members.items()) if t.role == "group" and t.members else ((t.role, 1),),
            group=t.group,
            pool=t.pool,
            gpus=t.gpus,
            scale_to_zero_after_s=t.scale_to_zero_after_s,
        )
        for t in f.targets
    )
    return KubeFile(file=f, targets=targets, units=units, forecast=_forecast(f.forecast, source))


def _forecast(data: dict[str, float] | None, source: str) -> ForecastConfig | None:
    if data is None:
        return None
    known = {f.name for f in fields(ForecastConfig)}
    if "replica_prompt_tps" not in data or set(data) - known:
        raise ConfigError(
            f"{source}: forecast: expected a mapping with replica_prompt_tps",
            hint=f"known keys: {', '.join(sorted(known))}",
        )
    return ForecastConfig(**data)
