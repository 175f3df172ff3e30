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
requests of the pods it removes; default 600) are optional, and so are infctl's forecast and a GPU budget
shared by the targets (each target's ``gpus`` per unit)::

    forecast: {replica_prompt_tps: 70000, headroom: 0.5, lead_s: 105}
    gpu_budget: 64
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from infctl.autoscaler.kube import KubeTarget
from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.engines import DEFAULT_ENGINE
from infctl.errors import ConfigError


@dataclass(frozen=True)
class KubeFile:
    release: str
    namespace: str | None
    engine: str
    router_url: str | None
    targets: tuple[KubeTarget, ...]
    units: tuple[UnitConfig, ...]
    thresholds: dict[str, float]
    """PolicyConfig threshold fields (queue_up, queue_down, kv_up, kv_down)."""
    interval_s: float
    dry_run: bool
    prometheus: str | None
    drain_timeout_s: float = 600.0
    """Longest a scale-in waits for the requests of the pods it removes (``KubeDrainer.timeout_s``)."""
    forecast: ForecastConfig | None = None
    gpu_budget: int | None = None

    def policy(self, **extra: Any) -> PolicyConfig:
        planned = {"forecast": self.forecast, "gpu_budget": self.gpu_budget}
        return PolicyConfig(units=self.units, **{**self.thresholds, **planned, **extra})


def is_kube_file(data: Any) -> bool:
    return isinstance(data, dict) and "targets" in data


def parse_kube_file(data: dict[str, Any], source: str) -> KubeFile:
    """The file's contents; ConfigError naming ``source`` and the key path on a mistake."""
    targets, units = [], []
    for i, t in enumerate(data.get("targets") or []):
        where = f"{source}: targets[{i}]"
        try:
            kind, name, role = str(t["kind"]), str(t["name"]), str(t["role"])
            lo, hi = int(t["min"]), int(t["max"])
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{where}: expected kind, name, role, min and max ({err})") from None
        if role == "group":
            members = tuple((str(r), int(n)) for r, n in (t.get("members") or {}).items())
            if not members:
                raise ConfigError(f"{where}: role group needs members, e.g. {{prefill: 1, decode: 2}}")
        else:
            members = ((role, 1),)
        targets.append(KubeTarget(unit=name, kind=kind, name=name))
        gpus = int(t.get("gpus", 1))
        units.append(UnitConfig(name, lo, hi, members, group=t.get("group"), pool=t.get("pool"), gpus=gpus))
    if not targets:
        raise ConfigError(f"{source}: no targets", hint="render it: `infctl render`, autoscaler bounds set")
    queue, kv = data.get("queue_per_replica") or {}, data.get("kv_usage") or {}
    pairs = (
        ("queue_up", queue.get("up")),
        ("queue_down", queue.get("down")),
        ("kv_up", kv.get("up")),
        ("kv_down", kv.get("down")),
    )
    thresholds = {k: float(v) for k, v in pairs if v is not None}
    return KubeFile(
        release=str(data.get("release", "")),
        namespace=data.get("namespace"),
        engine=str(data.get("engine", DEFAULT_ENGINE)),
        router_url=data.get("router_url"),
        targets=tuple(targets),
        units=tuple(units),
        thresholds=thresholds,
        interval_s=float(data.get("interval_s", 15.0)),
        dry_run=bool(data.get("dry_run", False)),
        prometheus=data.get("prometheus"),
        drain_timeout_s=float(data.get("drain_timeout_s", 600.0)),
        forecast=_forecast(data.get("forecast"), source),
        gpu_budget=None if data.get("gpu_budget") is None else int(data["gpu_budget"]),
    )


def _forecast(data: Any, source: str) -> ForecastConfig | None:
    if data is None:
        return None
    known = {f.name for f in fields(ForecastConfig)}
    if not isinstance(data, dict) or "replica_prompt_tps" not in data or set(data) - known:
        raise ConfigError(
            f"{source}: forecast: expected a mapping with replica_prompt_tps",
            hint=f"known keys: {', '.join(sorted(known))}",
        )
    return ForecastConfig(**{k: float(v) for k, v in data.items()})
