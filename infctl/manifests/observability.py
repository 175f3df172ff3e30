"""Alert rules and Grafana dashboards for a release, as plain data (templates wrap them in objects).

Engine series come from the engines' PodMonitor (job ``<namespace>/<release>-engines``, pod labels
``infctl.io/role``, ``infctl.io/group`` and ``infctl.io/pool`` copied as ``infctl_io_role`` and so on);
router series from the router's ServiceMonitor (job ``<release>-router``, the Service name), and the
autoscaler's from its own (job ``<release>-autoscaler``).

A "down" alert also fires on ``absent(up{...})``: a pod that does not exist (unschedulable, its workload
deleted) or that no monitor finds has no ``up`` series at all, so ``up == 0`` alone never fires for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from infctl.autoscaler.metrics import PREFIX as AUTOSCALER
from infctl.config import DeploymentProfile
from infctl.config.scale_to_zero import may_scale_to_zero
from infctl.engines import get_adapter
from infctl.engines.promql import running_series, waiting_series
from infctl.manifests.signals import prom_le, slo_bucket
from infctl.router.metrics import PREFIX as ROUTER

TTFT_SLO_S = 2.0
"""Default TTFT objective, seconds."""
SLO_TARGET = 0.95
"""Fraction of requests that must meet the TTFT objective."""
FAST_BURN = 14.4
"""Burn rate that spends a 30-day error budget in two days (the usual page threshold)."""


def selectors(profile: DeploymentProfile, namespace: str) -> tuple[str, str]:
    engines = f'namespace="{namespace}",job="{namespace}/{profile.name}-engines"'
    router = f'namespace="{namespace}",job="{profile.name}-router"'
    return engines, router


def autoscaler_selector(profile: DeploymentProfile, namespace: str) -> str:
    return f'namespace="{namespace}",job="{profile.name}-autoscaler"'


def alert_rules(
    profile: DeploymentProfile,
    namespace: str,
    ttft_slo_s: float = TTFT_SLO_S,
    autoscaler: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """PrometheusRule groups: engine down, TTFT SLO burn, KV usage high, queue growing, router ejections;
    with ``autoscaler`` (the rendered autoscaler.yaml; None: none rendered), :func:`autoscaler_rules`."""
    m = get_adapter(profile.model.engine).signal_metrics
    eng, rtr = selectors(profile, namespace)
    le = prom_le(slo_bucket(m, ttft_slo_s))
    budget = 1 - SLO_TARGET
    burn = FAST_BURN * budget

    def miss_ratio(window: str) -> str:
        return (
            f'(1 - sum(rate({m.ttft}_bucket{{{eng},le="{le}"}}[{window}]))'
            f" / clamp_min(sum(rate({m.ttft}_count{{{eng}}}[{window}])), 1e-9))"
        )

    labels = {"release": profile.name}
    scaler = profile.autoscaler
    # With every engine allowed at 0 (scale-to-zero), none running is no fault: only a failing scrape is.
    engine_down = f"up{{{eng}}} == 0" if may_scale_to_zero(profile) else _down(eng)
    rules: list[dict[str, Any]] = [
        _alert(
            "InfctlEngineDown",
            engine_down,
            "5m",
            "critical",
            labels,
            "{{ if $labels.pod }}Engine {{ $labels.pod }} of release "
            + profile.name
            + " is not serving /metrics.{{ else }}No engine of release "
            + profile.name
            + " is scraped: none is running, or the PodMonitor finds none.{{ end }}",
        ),
        _alert(
            "InfctlTTFTBudgetBurn",
            f"{miss_ratio('5m')} > {burn:.3g} and {miss_ratio('1h')} > {burn:.3g}",
            "2m",
            "critical",
            labels,
            f"Over {FAST_BURN:g}x the error budget: more than {budget:.0%} of requests take longer than "
            f"{le}s to the first token (objective {ttft_slo_s:g}s for {SLO_TARGET:.0%}).",
        ),
        _alert(
            "InfctlKVCacheUsageHigh",
            f"max by (pod) ({m.kv_usage}{{{eng}}}) > {max(scaler.kv_usage.up, 0.9):g}",
            "10m",
            "warning",
            labels,
            "KV cache of {{ $labels.pod }} is nearly full; expect preemptions and queueing.",
        ),
        _alert(
            "InfctlQueueGrowing",
            f"sum by (pod) ({waiting_series(m, eng)}) > {scaler.queue_per_replica.up:g}"
            f" and sum by (pod) ({waiting_series(m, eng, deriv='10m')}) > 0",
            "10m",
            "warning",
            labels,
            "Waiting requests on {{ $labels.pod }} keep growing: add replicas or check the router.",
        ),
        _alert(
            "InfctlRouterEjections",
            f"sum by (backend) (increase({ROUTER}ejections_total{{{rtr}}}[10m])) > 0",
            "0m",
            "warning",
            labels,
            "The router ejected backend {{ $labels.backend }} after failures.",
        ),
    ]
    if autoscaler is not None:
        rules += autoscaler_rules(profile, namespace, autoscaler)
    return [{"name": f"{profile.name}.infctl", "rules": rules}]


def autoscaler_rules(
    profile: DeploymentProfile, namespace: str, file: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The autoscaler not scraped; and, when a target may scale to 0 and the router holds the request that
    wakes it (``file``'s ``hold_when_empty_s``), a replica of it that started slower than that hold."""
    sel = autoscaler_selector(profile, namespace)
    labels = {"release": profile.name}
    rules = [
        _alert(
            "InfctlAutoscalerDown",
            _down(sel),
            "5m",
            "warning",
            labels,
            f"The autoscaler of release {profile.name} is not serving /metrics: no replica is added, "
            "removed or woken from 0 while it is down.",
        )
    ]
    hold = file.get("hold_when_empty_s")
    if hold is not None and any(t["min"] == 0 for t in file["targets"]):
        rules.append(
            _alert(
                "InfctlStartupOverHold",
                f"{AUTOSCALER}startup_over_hold{{{sel}}} == 1",
                "5m",
                "warning",
                labels,
                "Unit {{ $labels.unit }} of release "
                + profile.name
                + f" may scale to 0, but a replica took longer to start than the router holds the request "
                f"that wakes it ({hold:g}s), which then gets a 503: raise scale_to_zero.hold_s above the "
                f"engine's start-up ({AUTOSCALER}replica_startup_longest_seconds) or keep min: 1.",
            )
        )
    return rules


def _down(selector: str) -> str:
    """A target failing its scrape, or no target scraped at all (``absent`` keeps the selector's labels)."""
    return f"up{{{selector}}} == 0 or absent(up{{{selector}}})"


def _alert(
    name: str, expr: str, for_: str, severity: str, labels: dict[str, str], summary: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, **labels},
        "annotations": {"summary": summary},
    }


def dashboards(profile: DeploymentProfile, namespace: str) -> dict[str, str]:
    """File name -> Grafana JSON: gateway (router traffic), scheduler (routing), model performance."""
    m = get_adapter(profile.model.engine).signal_metrics
    eng, rtr = selectors(profile, namespace)
    gateway = [
        _panel("Requests/s by status", f"sum by (status) (rate({ROUTER}requests_total{{{rtr}}}[1m]))"),
        _panel(
            "Router TTFB p50/p95 (s)",
            *(_quantile(q, f"{ROUTER}time_to_first_byte_seconds", rtr) for q in (0.5, 0.95)),
        ),
        _panel("In-flight by backend", f"sum by (backend) ({ROUTER}inflight_requests{{{rtr}}})"),
        _panel("Ejections", f"sum by (backend) (increase({ROUTER}ejections_total{{{rtr}}}[5m]))"),
    ]
    scheduler = [
        _panel("Decisions/s by reason", f"sum by (reason) (rate({ROUTER}decisions_total{{{rtr}}}[1m]))"),
        _panel(
            "Retries and rejections/s",
            f"sum(rate({ROUTER}retries_total{{{rtr}}}[1m]))",
            f"sum by (reason) (rate({ROUTER}rejected_total{{{rtr}}}[1m]))",
        ),
        _panel(
            "Expected prefix-cache hit ratio",
            f"sum(rate({ROUTER}estimated_cached_tokens_total{{{rtr}}}[5m]))"
            f" / clamp_min(sum(rate({ROUTER}prompt_tokens_total{{{rtr}}}[5m])), 1)",
        ),
    ]
    model = [
        _panel(
            "TTFT p50/p95 by role (s)", *(_quantile(q, m.ttft, eng, "infctl_io_role") for q in (0.5, 0.95))
        ),
        _panel("ITL p95 by role (s)", _quantile(0.95, m.itl, eng, "infctl_io_role")),
        _panel(
            "Queue and running by pod",
            f"sum by (pod) ({waiting_series(m, eng)})",
            f"sum by (pod) ({running_series(m, eng)})",
        ),
        _panel("KV cache usage by pod", f"max by (pod) ({m.kv_usage}{{{eng}}})"),
        _panel(
            "Tokens/s",
            f"sum(rate({m.prompt_tokens}{{{eng}}}[1m]))",
            f"sum(rate({m.generation_tokens}{{{eng}}}[1m]))",
        ),
    ]
    boards = {"gateway": gateway, "scheduler": scheduler, "model-performance": model}
    if profile.length_pools is not None:
        boards["length-pools"] = pool_panels(profile, eng)
    return {
        f"{profile.name}-{key}.json": json.dumps(
            _board(f"{profile.name} / {key}", f"infctl-{profile.name}-{key}", panels),
            indent=1,
            sort_keys=True,
        )
        for key, panels in boards.items()
    }


def pool_panels(profile: DeploymentProfile, eng: str) -> list[dict[str, Any]]:
    """Per length pool (the ``infctl_io_pool`` label the PodMonitor copies): whether short prompts stay fast
    while long ones run, and which pool needs replicas. Titles name the pools' prompt limits."""
    m = get_adapter(profile.model.engine).signal_metrics
    pools = profile.length_pools or []
    limits = ", ".join(
        f"{p.name} <= {p.max_prompt_tokens}" if p.max_prompt_tokens is not None else f"{p.name} longer"
        for p in pools
    )
    by = "infctl_io_pool"
    return [
        _panel(
            f"TTFT p50/p99 by pool (s; {limits} tokens)",
            *(_quantile(q, m.ttft, eng, by) for q in (0.5, 0.99)),
        ),
        _panel("Serving engines by pool", f"count by ({by}) (up{{{eng}}} == 1)"),
        _panel(
            "Waiting requests per engine by pool",
            f"avg by ({by}) (sum by ({by}, pod) ({waiting_series(m, eng)}))",
        ),
        _panel("KV cache usage by pool (mean)", f"avg by ({by}) ({m.kv_usage}{{{eng}}})"),
        _panel(
            "Prompt and generated tokens/s by pool",
            f"sum by ({by}) (rate({m.prompt_tokens}{{{eng}}}[1m]))",
            f"sum by ({by}) (rate({m.generation_tokens}{{{eng}}}[1m]))",
        ),
        _panel("ITL p95 by pool (s)", _quantile(0.95, m.itl, eng, by)),
    ]


def _quantile(q: float, family: str, selector: str, by: str = "") -> str:
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({q:g}, sum by ({group}) (rate({family}_bucket{{{selector}}}[5m])))"


def _panel(title: str, *exprs: str) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "targets": [{"refId": chr(ord("A") + i), "expr": e} for i, e in enumerate(exprs)],
    }


def _board(title: str, uid: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}
    return {
        "title": title,
        "uid": uid[:40],
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
        "panels": panels,
    }
