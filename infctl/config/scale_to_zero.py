"""Scale-to-zero in a deployment profile: ``scale_to_zero`` beside bounds with ``min: 0``.

The ``autoscaler`` section and each length pool's ``autoscaler`` may carry one; it applies to that section's
bounds whose ``min`` is 0::

    autoscaler: {enabled: true, both: {min: 0, max: 4}, scale_to_zero: {after_s: 900}}
    length_pools:
      - {name: short, max_prompt_tokens: 2048, replicas: 2, autoscaler: {both: {min: 1, max: 6}}}
      - name: long
        replicas: 1
        autoscaler:
          both: {min: 0, max: 2}
          scale_to_zero: {after_s: 600, scaler: keda, prometheus: "http://prometheus.monitoring:9090"}

Replicas at 0 have no engine to queue at: the router holds the first request (``hold_s``, the router's
``hold_when_empty_s``) and exports it (``infctl_router_pool_queue_depth{pool}``, or
``infctl_router_queue_depth`` without pools), which wakes the replicas: infctl's autoscaler reads the
router; KEDA (``scaler: keda``) reads it from Prometheus through a ScaledObject's trigger.

Aggregated engines only (:func:`zero_problems` says why PD modes cannot).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, field_validator

from infctl.config._base import Problem, ProfileModel

if TYPE_CHECKING:
    from infctl.config.deployment import DeploymentProfile
    from infctl.config.settings import ScaleBounds

Loc = tuple[str | int, ...]
ROLES = ("both", "prefill", "decode")
DEFAULT_HOLD_S = 180.0


class ScaleToZero(ProfileModel):
    """Scale-to-zero for the bounds with ``min: 0`` in this section."""

    after_s: Annotated[float, Field(gt=0)]
    """Seconds with no request for these replicas (none routed, held by the router or running) after which
    they go to 0: the autoscaler's ``scale_to_zero_after_s``, KEDA's ``cooldownPeriod``."""
    hold_s: Annotated[float, Field(gt=0)] = DEFAULT_HOLD_S
    """How long the router holds a request while its replicas are at 0 and one starts (the router's
    ``hold_when_empty_s``; one for the whole router: the longest of the profile's). Set it above an
    engine's start-up (image, weights, warm-up), or the first request after a quiet spell gets a 503 with
    ``Retry-After``: infctl's autoscaler measures start-ups and flags one longer than this
    (``infctl_autoscaler_startup_over_hold``, ``infctl doctor --autoscaler``). Default 180."""
    scaler: Literal["infctl", "keda"] = "infctl"
    """Who scales these replicas on Kubernetes: ``infctl``'s autoscaler (default), or ``keda``: a
    ScaledObject (``minReplicaCount: 0``) on the requests the router holds for them and the requests their
    engines have waiting, read from ``prometheus``; infctl's autoscaler then leaves them alone. The local
    target has no KEDA: its autoscaler scales them either way."""
    prometheus: str | None = None
    """``scaler: keda``: the Prometheus KEDA queries (its prometheus trigger's ``serverAddress``), one that
    scrapes this release's router and engines (render's ServiceMonitor and PodMonitor)."""

    @field_validator("prometheus")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        # The rule of every URL infctl takes (the router's backends, the CLI's URL flags): a bad port or no
        # host is refused here too, not by KEDA once the ScaledObject is applied.
        from infctl.config.router import check_engine_url

        return None if value is None else check_engine_url(value)


def sections(profile: DeploymentProfile) -> Iterator[tuple[Loc, dict[str, ScaleBounds], ScaleToZero | None]]:
    """Every autoscaler section of ``profile``: where it is, its bounds by role, its ``scale_to_zero``."""
    scaler = profile.autoscaler
    yield ("autoscaler",), _bounds(scaler), scaler.scale_to_zero
    for i, pool in enumerate(profile.length_pools or []):
        if pool.autoscaler is not None:
            yield ("length_pools", i, "autoscaler"), _bounds(pool.autoscaler), pool.autoscaler.scale_to_zero


def _bounds(section: object) -> dict[str, ScaleBounds]:
    return {r: b for r in ROLES if (b := getattr(section, r, None)) is not None}


def zero_problems(profile: DeploymentProfile) -> list[Problem]:
    """Every inconsistent scale-to-zero setting of ``profile``.

    ``min: 0`` needs the idle window (``scale_to_zero``) and the router, which holds the request that wakes
    the replicas. It is refused in PD modes: the router holds a request only while its pool has no engine
    at all, and prefill and decode (or each group's roles) scale as separate units, so with one role at 0
    and the other still up a request would be sent to half a PD pair instead of held; group mode also
    counts whole groups from 1 (``infctl.autoscaler.profile.unit_configs``).
    """
    problems: list[Problem] = []
    zeroed = keda = False
    for here, bounds, stz in sections(profile):
        zeros = [role for role, b in bounds.items() if b.min == 0]
        zeroed = zeroed or bool(zeros)
        keda = keda or (stz is not None and stz.scaler == "keda")
        for role in zeros:
            if profile.mode != "aggregated":
                problems.append(
                    Problem(
                        (*here, role, "min"),
                        f"scale-to-zero needs aggregated engines; found min 0 in {profile.mode} mode",
                        hint="the router holds requests only while a pool has no engine at all, and prefill "
                        "and decode scale apart: a pool with one role at 0 would get requests it cannot "
                        "serve. Keep min >= 1 here",
                    )
                )
            elif stz is None:
                problems.append(
                    Problem(
                        (*here, role, "min"),
                        "min 0 scales to zero and needs its idle window; found no scale_to_zero here",
                        hint="add `scale_to_zero: {after_s: 900}` beside the bounds, or set min: 1",
                    )
                )
        if stz is not None:
            problems += _section_problems(here, stz, bool(zeros))
    if keda and profile.autoscaler.dry_run:
        problems.append(
            Problem(
                ("autoscaler", "dry_run"),
                "scaler keda scales for real (a ScaledObject has no dry run); found dry_run true",
                hint="set dry_run: false, or scaler: infctl to see the autoscaler's recommendations only",
            )
        )
    if zeroed and not profile.router.enabled:
        problems.append(
            Problem(
                ("router", "enabled"),
                "scale-to-zero needs the router (it holds the request that wakes replicas at 0); found it "
                "off",
            )
        )
    return problems


def _section_problems(here: Loc, stz: ScaleToZero, zeros: bool) -> list[Problem]:
    problems = []
    if not zeros:
        problems.append(
            Problem(
                (*here, "scale_to_zero"),
                "applies to bounds with min 0; found none here",
                hint="set min: 0 on the bounds that may scale to zero",
            )
        )
    if stz.scaler == "keda" and stz.prometheus is None:
        problems.append(
            Problem(
                (*here, "scale_to_zero", "prometheus"),
                "scaler keda reads the router's and engines' metrics from Prometheus; found no URL",
                hint='e.g. prometheus: "http://prometheus-operated.monitoring.svc:9090"',
                anchor=(*here, "scale_to_zero", "scaler"),
            )
        )
    if stz.scaler != "keda" and stz.prometheus is not None:
        problems.append(
            Problem(
                (*here, "scale_to_zero", "prometheus"), "only read with scaler: keda; found scaler infctl"
            )
        )
    return problems


def _zero_sections(profile: DeploymentProfile) -> Iterator[ScaleToZero | None]:
    """The ``scale_to_zero`` of each section with bounds at ``min: 0`` (None where it has none), when the
    autoscaler runs (nothing scales otherwise)."""
    if profile.autoscaler.enabled:
        for _, bounds, stz in sections(profile):
            if any(b.min == 0 for b in bounds.values()):
                yield stz


def may_scale_to_zero(profile: DeploymentProfile) -> bool:
    """Whether the autoscaler (or KEDA) may take some engines to 0 replicas."""
    return any(True for _ in _zero_sections(profile))


def hold_when_empty_s(profile: DeploymentProfile) -> float | None:
    """The router's ``hold_when_empty_s``: the longest ``hold_s`` of the sections that may scale to zero
    (None: none may, or the autoscaler is off and nothing scales)."""
    holds = [stz.hold_s for stz in _zero_sections(profile) if stz is not None]
    return max(holds) if holds else None


def zero_window(profile: DeploymentProfile, pool: str | None, role: str) -> ScaleToZero | None:
    """The ``scale_to_zero`` of ``role``'s bounds in length pool ``pool`` (None: the deployment's), when
    they have ``min: 0``; else None."""
    for here, bounds, stz in sections(profile):
        if stz is None or (role not in bounds) or bounds[role].min != 0:
            continue
        owner = None if here[0] == "autoscaler" else (profile.length_pools or [])[int(here[1])].name
        if owner == pool:
            return stz
    return None
