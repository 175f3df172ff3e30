"""Scale-to-zero in a deployment profile: ``min: 0`` with ``scale_to_zero`` beside it, and the combinations
``infctl validate`` refuses (no idle window, PD modes, KEDA without Prometheus, no router)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from infctl.config import DeploymentProfile, load_deployment
from infctl.config.scale_to_zero import hold_when_empty_s, zero_window
from infctl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
MODEL = {"engine": "vllm", "model": "Qwen/Qwen3-8B", "sim": {"profile": "llama3-8b-h100"}}


def local(**fields: Any) -> DeploymentProfile:
    data: dict[str, Any] = {
        "name": "zero",
        "target": "local",
        "mode": "aggregated",
        "replicas": 1,
        "model": MODEL,
    }
    merged = {k: v for k, v in {**data, **fields}.items() if v is not None}  # None: leave the key out
    return DeploymentProfile.model_validate(merged)


def refused(**fields: Any) -> str:
    with pytest.raises(ValidationError) as err:
        local(**fields)
    return str(err.value)


def test_min_zero_with_its_window_is_a_valid_profile() -> None:
    p = local(autoscaler={"enabled": True, "both": {"min": 0, "max": 4}, "scale_to_zero": {"after_s": 600}})
    assert p.autoscaler.both is not None and p.autoscaler.both.min == 0
    assert hold_when_empty_s(p) == 180.0  # the default hold
    assert (
        hold_when_empty_s(
            p.model_copy(update={"autoscaler": p.autoscaler.model_copy(update={"enabled": False})})
        )
        is None
    )
    window = zero_window(p, None, "both")
    assert window is not None and window.after_s == 600


def test_min_zero_needs_scale_to_zero() -> None:
    text = refused(autoscaler={"enabled": True, "both": {"min": 0, "max": 4}})
    assert "autoscaler.both.min" in text and "scale_to_zero" in text


def test_scale_to_zero_without_a_min_zero_bound_is_refused() -> None:
    text = refused(
        autoscaler={"enabled": True, "both": {"min": 1, "max": 4}, "scale_to_zero": {"after_s": 60}}
    )
    assert "autoscaler.scale_to_zero" in text and "min 0" in text


def test_pd_modes_cannot_scale_to_zero() -> None:
    overrides = [
        "autoscaler.enabled=true",
        "autoscaler.prefill={min: 0, max: 2}",
        "autoscaler.scale_to_zero={after_s: 60}",
    ]
    with pytest.raises(ConfigError) as err:
        load_deployment(ROOT / "profiles" / "local-pd.yaml", overrides)  # group mode
    assert "autoscaler.prefill.min" in err.value.message and "aggregated" in err.value.message
    assert err.value.hint is not None and "prefill and decode scale apart" in err.value.hint


def test_keda_needs_its_prometheus_and_prometheus_needs_keda() -> None:
    bounds = {"min": 0, "max": 2}
    text = refused(
        autoscaler={"enabled": True, "both": bounds, "scale_to_zero": {"after_s": 60, "scaler": "keda"}}
    )
    assert "scale_to_zero.prometheus" in text
    text = refused(
        autoscaler={
            "enabled": True,
            "both": bounds,
            "scale_to_zero": {"after_s": 60, "prometheus": "http://p:9090"},
        }
    )
    assert "only read with scaler: keda" in text


def test_keda_in_a_dry_run_is_refused() -> None:
    # A ScaledObject has no dry run: KEDA would take the replicas to 0 while the autoscaler only recommends.
    zero = {"after_s": 60, "scaler": "keda", "prometheus": "http://p:9090"}
    text = refused(
        autoscaler={"enabled": True, "dry_run": True, "both": {"min": 0, "max": 2}, "scale_to_zero": zero}
    )
    assert "autoscaler.dry_run" in text and "keda" in text
    pools = [
        {"name": "all", "replicas": 1, "autoscaler": {"both": {"min": 0, "max": 2}, "scale_to_zero": zero}}
    ]
    text = refused(replicas=None, length_pools=pools, autoscaler={"enabled": True, "dry_run": True})
    assert "autoscaler.dry_run" in text
    p = local(
        autoscaler={
            "enabled": True,
            "dry_run": True,
            "both": {"min": 0, "max": 2},
            "scale_to_zero": {"after_s": 60},
        }
    )
    assert p.autoscaler.dry_run  # infctl's own scaler honours the dry run


def test_scale_to_zero_needs_the_router() -> None:
    text = refused(
        router={"enabled": False},
        autoscaler={"enabled": True, "both": {"min": 0, "max": 2}, "scale_to_zero": {"after_s": 60}},
    )
    assert "router.enabled" in text


def test_a_length_pool_declares_its_own_and_the_router_holds_the_longest() -> None:
    p = local(
        replicas=None,
        length_pools=[
            {"name": "short", "max_prompt_tokens": 2048, "replicas": 1,
             "autoscaler": {"both": {"min": 0, "max": 2}, "scale_to_zero": {"after_s": 60, "hold_s": 30}}},
            {"name": "long", "replicas": 1,
             "autoscaler": {"both": {"min": 0, "max": 2}, "scale_to_zero": {"after_s": 90, "hold_s": 120}}},
        ],
        autoscaler={"enabled": True},
    )  # fmt: skip
    assert hold_when_empty_s(p) == 120.0
    short, long_ = zero_window(p, "short", "both"), zero_window(p, "long", "both")
    assert short is not None and long_ is not None and (short.after_s, long_.after_s) == (60, 90)
    assert zero_window(p, None, "both") is None


@pytest.mark.parametrize("url", ["p:9090", "http://", "http://p:99999"])
def test_kedas_prometheus_is_read_by_the_rule_of_every_url(url: str) -> None:
    """Only the scheme was checked: `http://` and `http://p:99999` passed, to fail in KEDA once applied."""
    zero = {"after_s": 60, "scaler": "keda", "prometheus": url}
    text = refused(autoscaler={"enabled": True, "both": {"min": 0, "max": 2}, "scale_to_zero": zero})
    assert "scale_to_zero.prometheus" in text and repr(url) in text
