"""The autoscaler's own file (``infctl autoscaler -f autoscaler.yaml``), which ``infctl render`` puts in the
autoscaler's ConfigMap: the release's scale targets and the settings of :class:`ScalingOptions`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from infctl.config._base import Count, Problem, ProfileModel, raise_problems
from infctl.config._engine import EngineName
from infctl.config.drain import DrainSettings
from infctl.config.router import ListenPort
from infctl.config.settings import ScalingOptions
from infctl.engines import DEFAULT_ENGINE

METRICS_PORT = 9464
"""The autoscaler's /metrics and /health port unless told otherwise (the rendered pod's port ``metrics``)."""


class ScaleTarget(ProfileModel):
    """One workload scaled through its ``/scale`` subresource: one unit of the policy."""

    kind: str
    """Workload kind: ``Deployment``, ``LeaderWorkerSet``, or any kind with a ``/scale`` subresource."""
    name: str
    """Workload name; also the unit's name."""
    role: str
    """``prefill``, ``decode`` or ``both``; ``group`` for a workload whose replicas are whole PD groups."""
    min: Annotated[int, Field(ge=0)]
    """Fewest replicas; 0 only with ``scale_to_zero_after_s``."""
    max: Count
    """Most replicas."""
    scale_to_zero_after_s: Annotated[float, Field(gt=0)] | None = None
    """Scale-to-zero: with ``min: 0``, seconds with no request for the target (none routed, waiting in the
    router or running in its engines) after which it goes to 0 replicas; the router holds the first request
    that comes next (its ``hold_when_empty_s``) while one starts. Default None: off."""
    members: dict[str, Count] | None = None
    """``role: group`` only: replicas of each role in one unit, e.g. ``{prefill: 1, decode: 2}``."""
    group: str | None = None
    """Only replicas of this PD group count toward the target's load. None: any."""
    pool: str | None = None
    """Only replicas of this length pool count toward the target's load. None: any."""
    gpus: Count = 1
    """GPUs one unit holds, for ``gpu_budget``. Default 1."""

    @model_validator(mode="after")
    def _checked(self) -> ScaleTarget:
        problems = []
        if self.min > self.max:
            problems.append(Problem(("max",), f"expected an integer >= min ({self.min}), found {self.max}"))
        if (self.min == 0) != (self.scale_to_zero_after_s is not None):
            problems.append(Problem(("min",), "min 0 needs scale_to_zero_after_s (and only min 0 takes it)"))
        if self.role == "group" and not self.members:
            problems.append(Problem(("members",), "role group needs members, e.g. {prefill: 1, decode: 2}"))
        raise_problems(problems)
        return self


class AutoscalerFile(ScalingOptions):
    """The file as ``infctl render`` writes it; ``targets`` is the one key it cannot do without."""

    targets: list[ScaleTarget] = Field(min_length=1)
    """The workloads to scale, one unit each."""
    release: str = ""
    """The release the targets belong to (labels, logs)."""
    namespace: str | None = None
    """Namespace of the targets. None: the kubeconfig's (or ``--namespace``)."""
    engine: EngineName = DEFAULT_ENGINE
    """Engine of the replicas (the metric names scraped). Default vllm (``infctl.engines.DEFAULT_ENGINE``)."""
    router_url: str | None = None
    """The router whose queue, TTFT and prompt-token rate count. None: none."""
    selector: dict[str, str] = Field(default_factory=dict)
    """Labels of the release's engine pods (what ``infctl render`` writes; read by Prometheus setups)."""
    prometheus: str | None = None
    """Read engine signals from this Prometheus instead of scraping the replicas. None: scrape."""
    drain_timeout_s: Annotated[float, Field(gt=0)] = DrainSettings.model_fields["timeout_s"].default
    """Longest a scale-in waits for the requests of the pods it removes, seconds. Default: a profile's
    ``drain.timeout_s`` default."""
    forecast: dict[str, float] | None = None
    """infctl's forecast (``infctl.autoscaler.settings.ForecastConfig`` fields), e.g.
    ``{replica_prompt_tps: 70000, headroom: 0.5, lead_s: 105}``. None: react to queue, KV and TTFT only."""
    gpu_budget: Count | None = None
    """Most GPUs all targets may hold together (each target's ``gpus`` per unit). None: only each ``max``."""
    hold_when_empty_s: Annotated[float, Field(gt=0)] | None = None
    """The router's ``hold_when_empty_s`` (a profile's longest ``scale_to_zero.hold_s``): a target with
    ``min: 0`` whose replicas start slower is logged and flagged (``infctl_autoscaler_startup_over_hold``).
    None: not checked."""
    memory_configmap: str | None = None
    """ConfigMap (in ``namespace``) the daemon keeps its memory in between restarts: cooldowns, the
    scale-down floor and a warm forecast (``infctl.autoscaler.memory``). ``infctl render`` writes
    ``<release>-autoscaler-memory`` and lets the daemon read and patch it. None: every start is cold."""
    host: str = "127.0.0.1"
    """Listen address of ``/metrics`` and ``/health`` (read-only: nothing served there changes anything).
    ``--host`` wins over it. Default 127.0.0.1; ``infctl render`` writes 0.0.0.0, so Prometheus reaches the
    pod."""
    port: ListenPort = METRICS_PORT
    """Port of ``/metrics`` and ``/health`` (0: one the system picks). ``--port`` wins over it. Default
    9464."""
