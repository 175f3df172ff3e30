"""A stock monitoring stack picks up what infctl renders: kube-prometheus-stack's selector labels by default
(configurable in the cluster profile), and every PromQL expression of the alert rules and dashboards passes
``promtool check rules``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from infctl.config import DeploymentProfile, load_deployment
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
PROFILES = sorted(p for p in (ROOT / "profiles").glob("*.yaml") if "target: kubernetes" in p.read_text())
MONITORS = ("PodMonitor", "ServiceMonitor", "PrometheusRule")
SCALE_TO_ZERO = ("autoscaler.both.min=0", "autoscaler.scale_to_zero={after_s: 900, hold_s: 300}")
"""Overrides that give the Qwen3 profile a unit that may scale to 0, and so the start-up-over-hold alert."""
CASES = [(p, ()) for p in PROFILES] + [(ROOT / "profiles" / "qwen3-8b-aggregated.yaml", SCALE_TO_ZERO)]


def with_cluster(profile: DeploymentProfile, **changes: Any) -> DeploymentProfile:
    assert profile.cluster is not None
    cluster = profile.cluster.model_validate({**profile.cluster.model_dump(), **changes})
    return profile.model_copy(update={"cluster": cluster})


def dashboards(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]


def test_kube_prometheus_stack_selects_every_monitor_and_dashboard_by_default() -> None:
    objs = render(load_deployment(ROOT / "profiles" / "kimi-k2-pool.yaml"))
    monitors = [o for o in objs if o["kind"] in MONITORS]
    assert {o["kind"] for o in monitors} == set(MONITORS)
    assert all(o["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in monitors)
    assert dashboards(objs) and all(
        o["metadata"]["labels"]["grafana_dashboard"] == "1" for o in dashboards(objs)
    )


def test_the_cluster_profile_names_its_own_selectors() -> None:
    base = load_deployment(ROOT / "profiles" / "qwen3-8b-aggregated.yaml")
    profile = with_cluster(
        base,
        monitoring={"prometheus_labels": {"prometheus": "platform"}, "dashboard_labels": {"team": "llm"}},
    )
    objs = render(profile)
    for o in objs:
        labels = o["metadata"]["labels"]
        if o["kind"] in MONITORS:
            assert labels["prometheus"] == "platform" and "release" not in labels
    assert all(o["metadata"]["labels"]["team"] == "llm" for o in dashboards(objs))
    assert not any("grafana_dashboard" in o["metadata"]["labels"] for o in dashboards(objs))
    with pytest.raises(ValueError, match="label"):
        with_cluster(base, monitoring={"prometheus_labels": {"not a key!": "x"}})


def test_an_optional_namespace_object_comes_first() -> None:
    base = load_deployment(ROOT / "profiles" / "qwen3-8b-aggregated.yaml")
    assert not any(o["kind"] == "Namespace" for o in render(base))
    objs = render(with_cluster(base, create_namespace=True))
    assert objs[0]["kind"] == "Namespace" and objs[0]["metadata"]["name"] == base.namespace
    assert validate_objects(objs[:1]) == []


def rules_file(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule's groups, plus one recording rule per dashboard query (promtool parses both)."""
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    groups = list(rule["spec"]["groups"])
    exprs = [
        t["expr"]
        for cm in dashboards(objs)
        for board in cm["data"].values()
        for panel in json.loads(board)["panels"]
        for t in panel["targets"]
    ]
    assert exprs
    groups.append(
        {
            "name": "dashboards",
            "rules": [{"record": f"infctl:dashboard_{i}", "expr": e} for i, e in enumerate(exprs)],
        }
    )
    return {"groups": groups}


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (Debian: apt-get install -y prometheus)",
)
@pytest.mark.parametrize(
    ("path", "overrides"), CASES, ids=[p.stem + ("-scale-to-zero" if o else "") for p, o in CASES]
)
def test_promtool_accepts_every_rule_and_dashboard_query(
    path: Path, overrides: tuple[str, ...], tmp_path: Path
) -> None:
    rules = rules_file(render(load_deployment(path, list(overrides))))
    if overrides:  # the alert only a unit that may scale to 0 gets is checked too
        assert any(r.get("alert") == "InfctlStartupOverHold" for g in rules["groups"] for r in g["rules"])
    file = tmp_path / "rules.yaml"
    file.write_text(yaml.safe_dump(rules))
    done = subprocess.run(
        ["promtool", "check", "rules", str(file)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_would_catch_a_broken_expression(tmp_path: Path) -> None:
    file = tmp_path / "rules.yaml"
    file.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m])"}]}]})
    )
    done = subprocess.run(
        ["promtool", "check", "rules", str(file)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
