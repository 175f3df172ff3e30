"""The autoscaler: scale prefill, decode and whole PD groups on queue length, KV usage and TTFT.

- :func:`desired_replicas` (pure, :mod:`~infctl.autoscaler.policy`) turns a :class:`ScalingSnapshot`, each
  unit's :class:`UnitStatus` and a :class:`PolicyConfig` plus the previous :class:`ScalerState` into a
  :class:`Decision` (a :class:`Recommendation` per unit, and the next state). The daemon, the benchmark and
  the tests all call it unchanged.
- :func:`serve` (async) and :func:`run` (sync) are the daemon: each interval it observes an
  :class:`Actuator` (:class:`LocalActuator`, :class:`KubeActuator`), reads signals (engines, the router,
  or Prometheus), decides, logs, exports ``infctl_autoscaler_*`` and, unless dry-run, scales.
- :func:`build` turns the command's :class:`Options` into both.
"""

from infctl.autoscaler.daemon import AutoscalerConfig, run, serve
from infctl.autoscaler.fleet import Actuator, Fleet, ReplicaInfo
from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI, KubeTarget, ScaleAPI
from infctl.autoscaler.local import LocalActuator
from infctl.autoscaler.policy import desired_replicas, replicas_by_role
from infctl.autoscaler.profile import Layout, policy_config, unit_configs
from infctl.autoscaler.promql import PrometheusSource
from infctl.autoscaler.schedule import ScheduleWindow, parse_window
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.setup import Options, build
from infctl.autoscaler.snapshot import (
    Decision,
    Recommendation,
    ReplicaSignals,
    ScalerState,
    ScalingSnapshot,
    UnitState,
    UnitStatus,
)

__all__ = [
    "Actuator",
    "AutoscalerConfig",
    "Decision",
    "Fleet",
    "KubeActuator",
    "KubeScaleAPI",
    "KubeTarget",
    "Layout",
    "LocalActuator",
    "Options",
    "PolicyConfig",
    "PrometheusSource",
    "Recommendation",
    "ReplicaInfo",
    "ReplicaSignals",
    "ScaleAPI",
    "ScalerState",
    "ScalingSnapshot",
    "ScheduleWindow",
    "UnitConfig",
    "UnitState",
    "UnitStatus",
    "build",
    "desired_replicas",
    "parse_window",
    "policy_config",
    "replicas_by_role",
    "run",
    "serve",
    "unit_configs",
]
