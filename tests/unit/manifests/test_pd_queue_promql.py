"""The rendered PromQL of a PD SGLang release counts the requests its engines hold and do not compute yet,
as the adapter does (3d0bbb9): InfctlQueueGrowing fires on a decode engine whose transfer queue grows while
its waiting queue stays empty, not on a prefill whose inflight queue (KV being sent) grows; KEDA's waiting
trigger reads the same sum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from promtoolkit import PROMTOOL, promtool_test

from infctl.config import DeploymentProfile, load_deployment
from infctl.engines import sglang
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
JOB = {"namespace": "inference", "job": "inference/deepseek-v3-engines"}


def series(name: str, pod: str, role: str, values: str) -> dict[str, str]:
    labels = {**JOB, "pod": pod, "model_name": "m", "engine_type": role, "tp_rank": "0", "pp_rank": "0"}
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


@PROMTOOL
def test_promtool_fires_queue_growing_on_a_decode_waiting_for_kv(tmp_path: Path) -> None:
    (rule,) = [o for o in render(load_deployment(DEEPSEEK)) if o["kind"] == "PrometheusRule"]
    (growing,) = [r for r in rule["spec"]["groups"][0]["rules"] if r.get("alert") == "InfctlQueueGrowing"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [growing]}]}))
    decode, prefill = "deepseek-v3-g0-decode-0", "deepseek-v3-g0-prefill-0"
    inputs = [
        series(sglang.NUM_QUEUE_REQS, decode, "decode", "0x40"),
        series(sglang.NUM_DECODE_TRANSFER_QUEUE_REQS, decode, "decode", "0+1x40"),
        series(sglang.NUM_QUEUE_REQS, prefill, "prefill", "0x40"),
        series(sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS, prefill, "prefill", "0+1x40"),
    ]
    labels = {"pod": decode, "severity": "warning", "release": "deepseek-v3"}
    summary = growing["annotations"]["summary"].replace("{{ $labels.pod }}", decode)
    checks = [
        {"eval_time": "15m", "alertname": "InfctlQueueGrowing", "exp_alerts": []},  # pending since 9m
        {
            "eval_time": "25m",
            "alertname": "InfctlQueueGrowing",
            "exp_alerts": [{"exp_labels": labels, "exp_annotations": {"summary": summary}}],
        },
    ]
    promtool_test(tmp_path, {"interval": "1m", "input_series": inputs, "alert_rule_test": checks})


def sglang_qwen_at_zero() -> DeploymentProfile:
    """The aggregated Qwen3 profile served by SGLang, one workload KEDA scales from 0."""
    base = load_deployment(QWEN)
    data: dict[str, Any] = base.model_dump(exclude_unset=True, mode="json")
    data["autoscaler"].pop("both", None)
    data["model"], data["cluster"] = base.model.model_copy(update={"engine": "sglang"}), base.cluster
    keda = {"after_s": 900, "scaler": "keda", "prometheus": "http://prom:9090"}
    data["autoscaler"] = {**data["autoscaler"], "both": {"min": 0, "max": 3}, "scale_to_zero": keda}
    return DeploymentProfile.model_validate({**data, "replicas": 1})


def test_kedas_waiting_trigger_reads_the_sglang_queue_as_the_adapter_does() -> None:
    objs = render(sglang_qwen_at_zero())
    assert validate_objects(objs) == []
    (so,) = [o for o in objs if o["kind"] == "ScaledObject"]
    _, waiting, running = (t["metadata"]["query"] for t in so["spec"]["triggers"])
    mine = 'namespace="inference",job="inference/qwen3-8b-engines",infctl_io_workload="engine",priority=""'
    assert waiting.startswith("sum(max without (tp_rank, pp_rank, moe_ep_rank) (")
    for name in (sglang.NUM_QUEUE_REQS, *sglang.WAITING_PD_QUEUES):
        assert f"{name}{{{mine}}}" in waiting, name
    assert (
        running == f"sum(max without (tp_rank, pp_rank, moe_ep_rank) ({sglang.NUM_RUNNING_REQS}{{{mine}}}))"
    )
