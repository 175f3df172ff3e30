"""Settings of the pieces around the engines: router, autoscaler, and the local target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from infctl.config._base import Count, Port, Problem, ProfileModel, check_name, raise_problems
from infctl.config.router import RouterOptions
from infctl.config.scale_to_zero import ScaleToZero

_ROUTER = RouterOptions.model_fields
"""The router's own settings: where the defaults this section shares with them are declared."""


class RouterSettings(ProfileModel):
    """The cache- and load-aware router in front of the engines."""

    enabled: bool = True
    """Run the router; when false, clients talk to the engines directly. Default true."""
    policy: Annotated[str, AfterValidator(check_name)] = _ROUTER["policy"].default
    """Routing policy preset, e.g. ``cache_aware`` or ``round_robin``. Default cache_aware."""
    port: Port = _ROUTER["port"].default
    """Port the router listens on (the OpenAI endpoint clients use). Default 8000."""
    replicas: Count = 2
    """Router instances (Kubernetes target). Default 2: one restarting (a rollout, a node drain) leaves the
    other serving, and a PodDisruptionBudget keeps one up."""
    image: str | None = None
    """Router container image. Default None: the image matching this infctl version."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Policy-specific settings, passed to the router as they are."""


class ScaleBounds(ProfileModel):
    """Replica bounds for one role."""

    min: Annotated[int, Field(ge=0)]
    """Fewest replicas the autoscaler keeps; 0 (scale-to-zero, aggregated engines) only with the section's
    ``scale_to_zero``."""
    max: Count
    """Most replicas the autoscaler asks for."""

    @model_validator(mode="after")
    def _ordered(self) -> ScaleBounds:
        if self.min > self.max:
            raise_problems([Problem(("max",), f"expected an integer >= min ({self.min}), found {self.max}")])
        return self


class Thresholds(ProfileModel):
    """Scale up above ``up``, down below ``down`` (the gap between them prevents flapping)."""

    up: float = Field(gt=0)
    down: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.down >= self.up:
            raise_problems([Problem(("down",), f"expected a number < up ({self.up:g}), found {self.down:g}")])
        return self


class UsageThresholds(Thresholds):
    """Thresholds on a fraction, 0..1."""

    up: float = Field(gt=0, le=1)
    down: float = Field(ge=0, le=1)


class ScalingOptions(ProfileModel):
    """What the autoscaler decides on, wherever it is configured: the one declaration of each default and
    its doc. A deployment profile's ``autoscaler`` section (:class:`AutoscalerSettings`) and the file
    ``infctl render`` writes for the daemon (``infctl.config.autoscaler.AutoscalerFile``) derive from it, and
    the decision code's defaults (``PolicyConfig``, ``AutoscalerConfig``) are read from it."""

    queue_per_replica: Thresholds = Thresholds(up=8, down=1)
    """Waiting requests per replica. Default up 8, down 1."""
    kv_usage: UsageThresholds = UsageThresholds(up=0.85, down=0.4)
    """KV-cache usage, 0..1. Default up 0.85, down 0.4."""
    interval_s: float = Field(default=15.0, gt=0)
    """Seconds between decisions. Default 15."""
    dry_run: bool = False
    """Log decisions without scaling. Default false."""


class AutoscalerSettings(ScalingOptions):
    """The autoscaler: bounds per role and the signals that move a role between them."""

    enabled: bool = False
    """Run the autoscaler. Default false."""
    prefill: ScaleBounds | None = None
    """Bounds for prefill replicas (group and pool modes; per group in group mode). None: fixed."""
    decode: ScaleBounds | None = None
    """Bounds for decode replicas (group and pool modes; per group in group mode). None: fixed."""
    both: ScaleBounds | None = None
    """Bounds for aggregated replicas (aggregated mode). None: fixed."""
    scale_to_zero: ScaleToZero | None = None
    """Scale-to-zero for the bounds here with ``min: 0``: the idle window, how long the router holds a
    request meanwhile, and who scales (``infctl.config.scale_to_zero``). None: off."""


class LocalSettings(ProfileModel):
    """The local target: engines, router and autoscaler as processes on this machine."""

    base_port: Port = 8100
    """First port given to a local engine; the supervisor counts up from it. Default 8100."""
    run_dir: Path | None = None
    """Directory for pid files, logs and state (``<run_dir>/<release>/``), relative to the working directory.
    Default None: the per-user state directory, ``$XDG_STATE_HOME/infctl/releases`` (``~/.local/state/...``),
    the same from every directory (``infctl.local.paths``)."""
    engine_command: list[str] | None = None
    """Command that starts a real engine, when not simulating. Default None: the engine adapter's command."""
    simulate: bool = True
    """Run simulated engines (no GPU, see ``model.sim``) instead of real ones. Default true."""
