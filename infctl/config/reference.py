"""``docs/settings.md``, written from the daemons' settings models: every key of ``router.yaml`` and
``autoscaler.yaml`` with its default and its field doc, so the page says what the code does.

Regenerate after changing a field: ``python -m infctl.config.reference > docs/settings.md`` (a test fails
while the page differs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from infctl.config.autoscaler import AutoscalerFile, ScaleTarget
from infctl.config.router import BackendEntry, DiscoverySettings, HealthPolicy, RouterFile

PAGES: tuple[tuple[str, str, tuple[tuple[str, type[BaseModel]], ...]], ...] = (
    (
        "router.yaml",
        "`infctl router -f router.yaml`; each flag of `infctl router` overrides the key of the same name.",
        (
            ("", RouterFile),
            ("backends[]", BackendEntry),
            ("health", HealthPolicy),
            ("discovery", DiscoverySettings),
        ),
    ),
    (
        "autoscaler.yaml",
        "`infctl autoscaler -f autoscaler.yaml`, the file `infctl render` puts in the autoscaler's ConfigMap "
        "(a deployment profile's `autoscaler` section shares its thresholds, `interval_s` and `dry_run`). "
        "Scale-to-zero: a target with `min: 0` and `scale_to_zero_after_s` goes to 0 replicas after that "
        "long without a request and back to 1 when the router holds one for it "
        "(`infctl_router_pool_queue_depth{pool}`, or `infctl_router_queue_depth` for a target without a "
        "pool); give the router `hold_when_empty_s` above an engine's start-up, or the first request after "
        "an idle spell gets a 503. A deployment profile declares it beside bounds with `min: 0` "
        "(`autoscaler.scale_to_zero` or a length pool's `autoscaler.scale_to_zero`: `after_s`, `hold_s`, "
        "`scaler: infctl|keda`, `prometheus`; aggregated engines only): `infctl render` writes these "
        "targets and the router's `hold_when_empty_s`, or for `scaler: keda` a KEDA ScaledObject "
        "(`minReplicaCount: 0`, prometheus triggers on the router's held requests and the engines' waiting "
        "ones, and their running ones to keep it active) in place of the target; between 1 and its max, "
        "KEDA's HPA scales down after its own 300 s stabilization window, not `after_s`. The local target "
        "runs its autoscaler with the same window and its router with the hold. The autoscaler measures "
        "each scale-up's start-up, from a replica asked for to ready (a restart or a replica failing "
        "readiness while the count holds is not timed), to within one decision interval "
        "(`infctl_autoscaler_replica_startup_seconds{unit}`, the longest of the last 8 "
        "in `infctl_autoscaler_replica_startup_longest_seconds`); given `hold_when_empty_s` (render and "
        "the local target pass the router's), a target with `min: 0` that started slower is logged once "
        "and flagged (`infctl_autoscaler_startup_over_hold{unit}` 1): raise `hold_s` above the start-up, "
        "or keep `min: 1`. Workloads KEDA scales are not measured. A restarted autoscaler resumes from "
        "the memory it saved after its last decision (`memory_configmap`, or `--memory-file`): cooldowns, "
        "the scale-down floor, panic mode, a warm forecast with its learned SLO headroom, and its recent "
        "start-up times (a unit flagged over the hold stays flagged); its high and "
        "low windows start again, and after a gap of the forecast's `window_s` its forecast starts cold.",
        (("", AutoscalerFile), ("targets[]", ScaleTarget)),
    ),
)


def _default(model: type[BaseModel], name: str) -> str:
    info = model.model_fields[name]
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value: Any = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its keys' (below)" if info.default_factory is not None else f"`{value.model_dump()}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return "—" if value is None or value in ([], {}) else f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("``", "`").replace("|", "\\|")


def page() -> str:
    """The whole page, Markdown."""
    out = [
        "# Daemon settings",
        "",
        "Written by `python -m infctl.config.reference` from the settings models' field docs; do not edit.",
    ]
    for title, intro, sections in PAGES:
        out += ["", f"## {title}", "", intro]
        for prefix, model in sections:
            out += ["", f"### {prefix or 'top level'}", "", "| key | default | meaning |", "|---|---|---|"]
            for name, info in model.model_fields.items():
                key = f"{prefix}.{name}" if prefix and not prefix.endswith("[]") else f"{prefix}{name}"
                if prefix.endswith("[]"):
                    key = f"{prefix[:-2]}[].{name}"
                out.append(f"| `{key}` | {_default(model, name)} | {_cell(info.description or '')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(page(), end="")
