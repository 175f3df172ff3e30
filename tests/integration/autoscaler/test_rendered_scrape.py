"""The daemon's metrics server at the rendered address (autoscaler.yaml's host, a port the system picks)
answers the rendered probes' path and serves the gauge the rendered alert names, with the ``unit`` label
its summary prints."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import yaml

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.server import MetricsServer
from infctl.config import load_deployment
from infctl.manifests.render import render
from infctl.telemetry import parse_metrics

ROOT = Path(__file__).resolve().parents[3]
ZERO = ["autoscaler.both.min=0", "autoscaler.scale_to_zero={after_s: 900, hold_s: 300}"]


async def test_what_prometheus_and_the_kubelet_ask_the_rendered_autoscaler_is_served() -> None:
    objs = render(load_deployment(ROOT / "profiles" / "qwen3-8b-aggregated.yaml", ZERO))
    name = "qwen3-8b-autoscaler"
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name)
    file = yaml.safe_load(cm["data"]["autoscaler.yaml"])
    (unit,) = [t["name"] for t in file["targets"] if t["min"] == 0]
    pod = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name)
    probe = pod["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"]
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    expr = next(
        r["expr"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "InfctlStartupOverHold"
    )
    gauge = re.match(r"(\w+)\{", expr)
    assert gauge is not None

    metrics = AutoscalerMetrics(dry_run=False)
    metrics.hold_s = file["hold_when_empty_s"]
    metrics.over_hold[unit] = True  # as the daemon sets it after a start-up longer than the hold
    server = await MetricsServer.start(file["host"], 0, metrics)
    try:
        port = server.runner.addresses[0][1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
            assert (await client.get(probe)).status_code == 200
            text = (await client.get("/metrics")).text
    finally:
        await server.close()
    (sample,) = parse_metrics(text, {gauge.group(1)})[gauge.group(1)]
    assert sample.labels == {"unit": unit} and sample.value == 1.0
