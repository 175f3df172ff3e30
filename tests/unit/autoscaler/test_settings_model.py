"""One settings model for the autoscaler: ``ScalingOptions`` declares the thresholds, the interval and dry
run once; the profile's section, the rendered file, the policy and the daemon all start from it."""

from __future__ import annotations

import pytest
import typer

from infctl.autoscaler.daemon import AutoscalerConfig
from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.cli import autoscaler as autoscaler_cli
from infctl.cli.flags import field_help
from infctl.config.autoscaler import AutoscalerFile
from infctl.config.drain import DrainSettings
from infctl.config.settings import AutoscalerSettings, ScalingOptions
from infctl.errors import ConfigError

MINIMAL = {"targets": [{"kind": "Deployment", "name": "e", "role": "both", "min": 1, "max": 3}]}


def test_each_scaling_setting_is_declared_once() -> None:
    options = set(ScalingOptions.model_fields)
    for model in (AutoscalerSettings, AutoscalerFile):
        assert issubclass(model, ScalingOptions)
        assert not options & set(vars(model).get("__annotations__", {})), model.__name__


def test_a_file_with_only_targets_runs_on_the_models_defaults() -> None:
    d = ScalingOptions()
    kf = parse_kube_file(MINIMAL, "autoscaler.yaml")
    assert {k: getattr(kf.file, k) for k in ScalingOptions.model_fields} == dict(d)
    policy = kf.policy()
    assert (policy.queue_up, policy.queue_down) == (d.queue_per_replica.up, d.queue_per_replica.down)
    assert (policy.kv_up, policy.kv_down) == (d.kv_usage.up, d.kv_usage.down)
    assert kf.file.drain_timeout_s == DrainSettings().timeout_s
    assert kf.units == (UnitConfig("e", 1, 3),)


def test_the_decision_code_starts_where_the_file_does() -> None:
    """PolicyConfig and AutoscalerConfig are built without a file by the simulator and the tests."""
    d = ScalingOptions()
    bare = PolicyConfig(units=(UnitConfig("both", 1, 2),))
    assert (bare.queue_up, bare.queue_down, bare.kv_up, bare.kv_down) == (
        d.queue_per_replica.up,
        d.queue_per_replica.down,
        d.kv_usage.up,
        d.kv_usage.down,
    )
    daemon = AutoscalerConfig(policy=bare)
    assert (daemon.interval_s, daemon.dry_run) == (d.interval_s, d.dry_run)


def test_a_wrong_file_names_the_key() -> None:
    bad = {"targets": [{"kind": "Deployment", "name": "e", "role": "group", "min": 1, "max": 3}]}
    with pytest.raises(ConfigError) as err:
        parse_kube_file(bad, "a.yaml")
    assert "a.yaml: targets[0]" in err.value.message and "members" in err.value.message


def test_the_interval_flag_is_helped_by_the_fields_doc() -> None:
    holder = typer.Typer()
    autoscaler_cli.register(holder)
    helps = {p.opts[-1]: getattr(p, "help", None) for p in typer.main.get_command(holder).params}
    assert helps["--interval"] == field_help(ScalingOptions, "interval_s")
    assert helps["--max-step-up"] == f"Units added at once. Default {PolicyConfig(units=()).max_step_up}."
