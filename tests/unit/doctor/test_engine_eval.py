"""Engine verdicts on text fixtures: no server, just what an engine would have answered."""

from __future__ import annotations

from infctl.doctor.engine_eval import (
    detect_engine,
    evaluate_completion,
    evaluate_health,
    evaluate_metrics,
    evaluate_models,
    evaluate_prefix_caching,
    server_info_flags,
)
from infctl.engines import get_adapter
from infctl.telemetry import parse_metrics

VLLM = get_adapter("vllm")
SGLANG = get_adapter("sglang")

VLLM_CURRENT = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:cache_config_info{block_size="16",enable_prefix_caching="True",engine="0",num_gpu_blocks="1000"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 40.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0
"""
VLLM_V08 = """\
vllm:num_requests_running{model_name="m"} 2.0
vllm:num_requests_waiting{model_name="m"} 1.0
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
vllm:gpu_prefix_cache_queries_total{model_name="m"} 10.0
vllm:gpu_prefix_cache_hits_total{model_name="m"} 4.0
vllm:prompt_tokens_total{model_name="m"} 100.0
"""
VLLM_LEGACY_EXPOSED = VLLM_CURRENT + 'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\n'
VLLM_NO_PREFIX_CACHE = VLLM_CURRENT.replace('enable_prefix_caching="True"', 'enable_prefix_caching="False"')
SGLANG_TEXT = """\
sglang:num_running_reqs{model_name="m",tp_rank="0"} 1.0
sglang:num_queue_reqs{model_name="m",tp_rank="0"} 0.0
sglang:token_usage{model_name="m",tp_rank="0"} 0.1
sglang:max_total_num_tokens{model_name="m",tp_rank="0"} 50000.0
sglang:cached_tokens_total{model_name="m"} 5.0
sglang:prompt_tokens_total{model_name="m"} 50.0
"""


def by_name(results: list) -> dict:  # type: ignore[type-arg]
    return {r.name: r for r in results}


def test_current_vllm_metrics_pass() -> None:
    found = by_name(evaluate_metrics(parse_metrics(VLLM_CURRENT), VLLM))
    assert found["metrics"].status == "pass"
    assert found["deprecated metrics"].status == "pass"


def test_signals_read_from_deprecated_names_warn_to_upgrade() -> None:
    found = by_name(evaluate_metrics(parse_metrics(VLLM_V08), VLLM))
    dep = found["deprecated metrics"]
    assert dep.status == "warn"
    assert "vllm:gpu_cache_usage_perc" in dep.summary and "vllm:gpu_prefix_cache_hits_total" in dep.summary
    assert "upgrade vllm" in (dep.fix or "")
    # the adapter still finds every required signal through its fallbacks; only the cache config is gone
    assert found["metrics"].status == "warn" and "cache config" in found["metrics"].summary


def test_deprecated_names_exposed_beside_current_ones_warn_with_the_flag() -> None:
    dep = by_name(evaluate_metrics(parse_metrics(VLLM_LEGACY_EXPOSED), VLLM))["deprecated metrics"]
    assert dep.status == "warn" and "exposes deprecated names: vllm:gpu_cache_usage_perc" in dep.summary
    assert "--show-hidden-metrics-for-version" in (dep.fix or "")


def test_a_missing_required_signal_fails_and_says_who_needs_it() -> None:
    text = "\n".join(line for line in VLLM_CURRENT.splitlines() if "num_requests_waiting" not in line)
    metrics = by_name(evaluate_metrics(parse_metrics(text), VLLM))["metrics"]
    assert metrics.status == "fail"
    assert "queue (vllm:num_requests_waiting; router, autoscaler)" in metrics.summary


def test_empty_metrics_point_at_the_engine_flag() -> None:
    [result] = evaluate_metrics({}, SGLANG, metrics_on=False)
    assert result.status == "fail" and result.fix == "start SGLang with --enable-metrics"


def test_sglang_metrics_pass_and_the_engine_is_told_from_names() -> None:
    families = parse_metrics(SGLANG_TEXT)
    assert by_name(evaluate_metrics(families, SGLANG))["metrics"].status == "pass"
    assert detect_engine(families) == "sglang"
    assert detect_engine(parse_metrics(VLLM_CURRENT)) == "vllm"
    assert detect_engine({}) is None


def test_prefix_caching_verdicts() -> None:
    off = VLLM.signals(parse_metrics(VLLM_NO_PREFIX_CACHE)).prefix_caching
    assert off is False
    failed = evaluate_prefix_caching(VLLM, off)
    assert failed.status == "fail" and "--enable-prefix-caching" in (failed.fix or "")
    assert evaluate_prefix_caching(VLLM, False, expected=False).status == "pass"
    assert evaluate_prefix_caching(VLLM, True, expected=False).status == "warn"
    assert evaluate_prefix_caching(SGLANG, None).status == "skip"


def test_sglang_server_info_flags() -> None:
    assert server_info_flags(SGLANG, {"disable_radix_cache": True, "enable_metrics": False}) == (False, False)
    assert server_info_flags(SGLANG, {"disable_radix_cache": False}) == (True, None)
    assert server_info_flags(VLLM, {"disable_radix_cache": True}) == (None, None)
    assert server_info_flags(SGLANG, "not json") == (None, None)


def test_health_means_different_things_per_engine() -> None:
    assert evaluate_health(VLLM, 200).status == "pass"
    dead = evaluate_health(VLLM, 503)
    assert dead.status == "fail" and "died" in dead.summary  # vLLM: 503 is a dead engine core
    warming = evaluate_health(SGLANG, 503, deep_status=None)
    assert warming.status == "warn" and "warming up" in warming.summary  # SGLang: 503 until warm-up ran
    broken = evaluate_health(SGLANG, 503, deep_status=503)
    assert broken.status == "fail" and "/health_generate" in broken.summary
    gone = evaluate_health(VLLM, None, error="ConnectError")
    assert gone.status == "fail" and "URL" in (gone.fix or "")
    assert evaluate_health(VLLM, 500).status == "fail"


def test_models_and_completion() -> None:
    body = {"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}
    assert evaluate_models(body, "m2").status == "pass"
    wrong = evaluate_models(body, "m3")
    assert wrong.status == "fail" and "--served-model-name m3" in (wrong.fix or "")
    assert evaluate_models({"data": []}, None).status == "fail"
    assert evaluate_models("<html>", None).status == "fail"
    assert evaluate_completion(200, {"choices": [{"text": "x"}]}, 0.012).status == "pass"
    bad = evaluate_completion(400, {"error": {"message": "model not found"}}, 0.0)
    assert bad.status == "fail" and "model not found" in bad.summary
    assert evaluate_completion(200, {"choices": []}, 0.0).status == "fail"
    assert evaluate_completion(None, None, 0.0, error="ReadTimeout").status == "fail"
