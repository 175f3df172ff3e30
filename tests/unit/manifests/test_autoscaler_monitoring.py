"""The rendered autoscaler is scraped like the router: it listens on its pod's address (autoscaler.yaml's
host and port), names the container port, is probed on /health, sits behind a Service that the release's
ServiceMonitor selects, and the PrometheusRule alerts on it being down (or not scraped at all) and on a unit
that may scale to 0 starting slower than the router's hold (``promtool test rules`` fires both on series of
that job). The engines' down alert covers no engine scraped too, unless they may scale to 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from promtoolkit import PROMTOOL, promtool_test

from infctl.autoscaler.kubefile import parse_kube_file
from infctl.config import DeploymentProfile, load_deployment
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
ZERO = ("autoscaler.both.min=0", "autoscaler.scale_to_zero={after_s: 900, hold_s: 300}")
GAUGE = "infctl_autoscaler_startup_over_hold"

Obj = dict[str, Any]


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def alerts(objs: list[Obj]) -> dict[str, Obj]:
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def scale_to_zero() -> DeploymentProfile:
    return load_deployment(QWEN, list(ZERO))


def test_the_autoscaler_listens_on_a_named_port_that_its_service_and_service_monitor_reach() -> None:
    objs = render(load_deployment(QWEN))
    assert validate_objects(objs) == []
    name = "qwen3-8b-autoscaler"
    file = parse_kube_file(
        yaml.safe_load(one(objs, "ConfigMap", name)["data"]["autoscaler.yaml"]), "autoscaler.yaml"
    ).file
    assert (file.host, file.port) == ("0.0.0.0", 9464)  # not the daemon's loopback default
    pod = one(objs, "Deployment", name)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": file.port}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "metrics"}
    svc = one(objs, "Service", name)
    assert selects(svc["spec"]["selector"], pod["metadata"]["labels"])
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": file.port, "targetPort": "metrics"}]
    monitor = one(objs, "ServiceMonitor", name)
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # the cluster profile's
    assert selects(monitor["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("metrics", "/metrics")]
    # No other monitor scrapes it twice, and it selects neither the router nor the engines.
    others = [o for o in objs if o["kind"] in ("ServiceMonitor", "PodMonitor") and o is not monitor]
    assert not any(selects(o["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]) for o in others)
    router = one(objs, "Service", "qwen3-8b-router")
    assert not selects(monitor["spec"]["selector"]["matchLabels"], router["metadata"]["labels"])


def test_the_down_alert_uses_the_job_the_service_monitor_gives_and_over_hold_needs_a_unit_at_zero() -> None:
    objs = render(load_deployment(QWEN))
    rules = alerts(objs)
    # A ServiceMonitor's job is its Service's name; a pod that does not exist has no up series at all.
    up = 'up{namespace="inference",job="qwen3-8b-autoscaler"}'
    assert rules["InfctlAutoscalerDown"]["expr"] == f"{up} == 0 or absent({up})"
    assert "InfctlStartupOverHold" not in rules  # min 2: the gauge has no series to alert on

    rule = alerts(render(scale_to_zero()))["InfctlStartupOverHold"]
    assert rule["expr"] == f'{GAUGE}{{namespace="inference",job="qwen3-8b-autoscaler"}} == 1'
    assert rule["for"] == "5m" and rule["labels"]["severity"] == "warning"
    summary = rule["annotations"]["summary"]
    assert "{{ $labels.unit }}" in summary and "(300s)" in summary
    assert "scale_to_zero.hold_s" in summary and "min: 1" in summary


def test_a_release_whose_units_keda_scales_renders_no_autoscaler_monitor_or_alert() -> None:
    keda = "autoscaler.scale_to_zero={after_s: 900, scaler: keda, prometheus: http://prom:9090}"
    objs = render(load_deployment(QWEN, ["autoscaler.both.min=0", keda]))
    assert not [o for o in objs if o["metadata"]["name"].endswith("-autoscaler")]
    assert not [a for a in alerts(objs) if "Autoscaler" in a or "OverHold" in a]


@PROMTOOL
def test_promtool_fires_both_alerts_on_the_autoscaler_jobs_series(tmp_path: Path) -> None:
    names = ("InfctlAutoscalerDown", "InfctlStartupOverHold")
    summary = write_rules(tmp_path, render(scale_to_zero()), names)
    job = {"namespace": "inference", "job": "qwen3-8b-autoscaler"}
    labels = {**job, "severity": "warning", "release": "qwen3-8b"}
    target = "{" + ",".join(f'{k}="{v}"' for k, v in {**job, "unit": "qwen3-8b-engine"}.items()) + "}"
    over = summary["InfctlStartupOverHold"].replace("{{ $labels.unit }}", "qwen3-8b-engine")
    promtool_test(
        tmp_path,
        # Up for 3 minutes, then failing scrapes; the unit over the hold from minute 2.
        case(
            {'up{namespace="inference",job="qwen3-8b-autoscaler"}': "1 1 1 0x10", GAUGE + target: "0 0 1x10"},
            fires("4m", "InfctlStartupOverHold"),
            fires("8m", "InfctlStartupOverHold", {**labels, "unit": "qwen3-8b-engine"}, over),
            fires("7m", "InfctlAutoscalerDown"),
            fires("9m", "InfctlAutoscalerDown", labels, summary["InfctlAutoscalerDown"]),
        ),
        # No autoscaler pod at all (unschedulable, its Deployment deleted): no up series, still fires.
        case(
            {'up{namespace="inference",job="other"}': "1x10"},
            fires("4m", "InfctlAutoscalerDown"),
            fires("6m", "InfctlAutoscalerDown", labels, summary["InfctlAutoscalerDown"]),
        ),
    )


@PROMTOOL
def test_promtool_fires_engine_down_on_a_failing_scrape_and_on_no_engine_scraped(tmp_path: Path) -> None:
    write_rules(tmp_path, render(load_deployment(QWEN)), ("InfctlEngineDown",))
    job = {"namespace": "inference", "job": "inference/qwen3-8b-engines"}
    labels = {**job, "severity": "critical", "release": "qwen3-8b"}
    pod = "{" + ",".join(f'{k}="{v}"' for k, v in {**job, "pod": "e-0"}.items()) + "}"
    down = "Engine e-0 of release qwen3-8b is not serving /metrics."
    none = "No engine of release qwen3-8b is scraped: none is running, or the PodMonitor finds none."
    promtool_test(
        tmp_path,
        case({"up" + pod: "1 0x10"}, fires("7m", "InfctlEngineDown", {**labels, "pod": "e-0"}, down)),
        case(
            {'up{namespace="inference",job="other"}': "1x10"}, fires("6m", "InfctlEngineDown", labels, none)
        ),
    )


def test_engines_that_may_scale_to_0_are_not_alerted_on_for_being_absent() -> None:
    up = 'up{namespace="inference",job="inference/qwen3-8b-engines"}'
    assert alerts(render(load_deployment(QWEN)))["InfctlEngineDown"]["expr"] == f"{up} == 0 or absent({up})"
    assert alerts(render(scale_to_zero()))["InfctlEngineDown"]["expr"] == f"{up} == 0"


def write_rules(tmp_path: Path, objs: list[Obj], names: tuple[str, ...]) -> dict[str, str]:
    """The PrometheusRule's alerts ``names`` in ``tmp_path``/rules.yaml; their summaries by name."""
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    ours = [r for r in rule["spec"]["groups"][0]["rules"] if r["alert"] in names]
    assert len(ours) == len(names)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "infctl", "rules": ours}]}))
    return {r["alert"]: r["annotations"]["summary"] for r in ours}


def case(series: dict[str, str], *checks: Obj) -> Obj:
    """A ``promtool test rules`` case: these series (minute by minute), these checks."""
    inputs = [{"series": name, "values": values} for name, values in series.items()]
    return {"interval": "1m", "input_series": inputs, "alert_rule_test": list(checks)}


def fires(at: str, alert: str, labels: dict[str, str] | None = None, summary: str = "") -> Obj:
    """``alert`` firing at ``at`` with ``labels`` and ``summary``; without labels, not firing."""
    alerts = [] if labels is None else [{"exp_labels": labels, "exp_annotations": {"summary": summary}}]
    return {"eval_time": at, "alertname": alert, "exp_alerts": alerts}


def test_docs_monitoring_lists_every_alert_render_writes() -> None:
    doc = (ROOT / "docs" / "monitoring.md").read_text()
    for profile in (load_deployment(QWEN), scale_to_zero()):
        for name in alerts(render(profile)):
            assert f"| `{name}` |" in doc, name
