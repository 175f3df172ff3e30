"""From command-line options to a daemon config and an actuator (the CLI hands its flags to :func:`build`).

Three sources, one of which is required:

- ``--layout JSON`` with ``--control-url URL``: what the local planner gives a supervised autoscaler;
- ``-f`` a deployment profile: its units and thresholds; target local acts on the running release;
- ``-f`` the rendered ``autoscaler.yaml`` (:mod:`infctl.autoscaler.kubefile`): Kubernetes workloads.

The policy's memory (:mod:`infctl.autoscaler.memory`) is kept in ``--memory-file``, else in the file's
``memory_configmap`` on Kubernetes; a local release's supervisor passes a file in the release's directory.
Without either, every start is cold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from infctl.autoscaler.daemon import AutoscalerConfig
from infctl.autoscaler.fleet import Actuator
from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI
from infctl.autoscaler.kube_drain import KubeDrainer, KubePodAPI
from infctl.autoscaler.kubefile import is_kube_file, parse_kube_file
from infctl.autoscaler.local import LocalActuator, control_url
from infctl.autoscaler.memory_store import ConfigMapStore, FileStore, MemoryStore
from infctl.autoscaler.profile import Layout, policy_config
from infctl.autoscaler.promql import PrometheusSource
from infctl.autoscaler.schedule import parse_window
from infctl.autoscaler.settings import PolicyConfig
from infctl.config import load_deployment, read_yaml
from infctl.engines import get_adapter
from infctl.errors import ConfigError
from infctl.local.paths import resolve_run_dir


@dataclass(frozen=True)
class Options:
    """The command's flags, unparsed beyond their types."""

    file: Path | None = None
    overrides: tuple[str, ...] = ()
    """``KEY.PATH=VALUE`` applied to a deployment profile, as ``infctl deploy --set`` does."""
    layout: str | None = None
    local: str | None = None
    run_dir: Path | None = None
    router: str | None = None
    prometheus: str | None = None
    selector: tuple[str, ...] = ()
    dry_run: bool = False
    interval: float | None = None
    time_scale: float = 1.0
    """Wall seconds per policy second (0.01: a hundred times faster, for simulated engines)."""
    schedules: tuple[str, ...] = ()
    ratio: str | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    """Further PolicyConfig fields (ttft_slo_s, windows, cooldowns, steps) given on the command line."""
    host: str | None = None
    """Metrics listen address; None: autoscaler.yaml's ``host``, else ``AutoscalerConfig.host``."""
    port: int | None = None
    """Metrics port; None: autoscaler.yaml's ``port``, else ``AutoscalerConfig.port``."""
    kube: dict[str, Any] = field(default_factory=dict)
    """kubeconfig, context, namespace (the global options)."""
    memory_file: Path | None = None
    """Keep the policy's memory here between restarts (wins over the file's ``memory_configmap``)."""


def build(opts: Options) -> tuple[AutoscalerConfig, Actuator]:
    if opts.time_scale <= 0:
        raise ConfigError(f"--time-scale must be > 0, got {opts.time_scale:g}")
    extra = {**opts.policy, "schedules": tuple(parse_window(s) for s in opts.schedules)}
    if opts.ratio is not None:
        extra["ratio"] = _ratio(opts.ratio)
    if opts.layout is not None:
        if opts.local is None:
            raise ConfigError("--layout needs --control-url URL (the supervisor's control endpoint)")
        layout = Layout.from_json(opts.layout)
        return _config(
            opts,
            policy_config(layout, **extra),
            layout.engine,
            layout.settings.interval_s,
            layout.settings.dry_run,
            hold=layout.hold_when_empty_s,
            memory=_file_store(opts),
        ), LocalActuator(_client(), opts.local)
    if opts.file is None:
        raise ConfigError("no deployment given", hint="pass -f PROFILE (or the rendered autoscaler.yaml)")
    data = _read_yaml(opts.file)
    if is_kube_file(data):
        kf = parse_kube_file(data, str(opts.file))
        from infctl.kube import ClientSettings, connect

        namespace = opts.kube.get("namespace") or kf.file.namespace
        client = connect(ClientSettings(**{**opts.kube, "namespace": namespace}))
        cfg = _config(
            opts,
            kf.policy(**extra),
            kf.file.engine,
            kf.file.interval_s,
            kf.file.dry_run,
            prometheus=opts.prometheus or kf.file.prometheus,
            hold=kf.file.hold_when_empty_s,
            listen=(kf.file.host, kf.file.port),
            memory=_file_store(opts)
            or (
                ConfigMapStore(client, kf.file.memory_configmap, namespace)
                if kf.file.memory_configmap
                else None
            ),
        )
        # A scale-in drains the pods it removes first (annotated for every router, engines polled idle).
        drainer = KubeDrainer(
            KubePodAPI(client, namespace), _client(), get_adapter(kf.file.engine), kf.file.drain_timeout_s
        )
        router = opts.router or kf.file.router_url
        return cfg, KubeActuator(kf.targets, KubeScaleAPI(client), router, drainer)
    profile = load_deployment(opts.file, opts.overrides)
    if profile.target != "local" and opts.local is None:
        raise ConfigError(
            f"{opts.file}: target {profile.target}: give the rendered autoscaler.yaml instead",
            hint="infctl render -f PROFILE writes it into the autoscaler's ConfigMap",
        )
    layout = Layout.from_profile(profile)
    url = opts.local or control_url(resolve_run_dir(opts.run_dir, profile.local.run_dir), profile.name)
    cfg = _config(
        opts,
        policy_config(layout, **extra),
        layout.engine,
        layout.settings.interval_s,
        layout.settings.dry_run,
        hold=layout.hold_when_empty_s,
        memory=_file_store(opts),
    )
    return cfg, LocalActuator(_client(), url)


def _config(
    opts: Options,
    policy: PolicyConfig,
    engine: str,
    interval: float,
    dry_run: bool,
    prometheus: str | None = None,
    hold: float | None = None,
    listen: tuple[str, int | None] = (AutoscalerConfig.host, AutoscalerConfig.port),
    memory: MemoryStore | None = None,
) -> AutoscalerConfig:
    selector = dict(s.split("=", 1) for s in opts.selector if "=" in s)
    source = opts.prometheus or prometheus
    return AutoscalerConfig(
        policy=policy.scaled(opts.time_scale),
        engine=engine,
        interval_s=(opts.interval or interval) * opts.time_scale,
        dry_run=opts.dry_run or dry_run,
        router_url=opts.router,
        prometheus=PrometheusSource(source, selector) if source else None,
        host=opts.host or listen[0],
        port=listen[1] if opts.port is None else opts.port,
        # Wall seconds, as the router holds: not scaled by --time-scale, nor is the daemon's clock.
        hold_when_empty_s=hold,
        memory=memory,
    )


def _file_store(opts: Options) -> FileStore | None:
    return None if opts.memory_file is None else FileStore(opts.memory_file)


def _ratio(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition(":")
    try:
        return float(lo), float(hi if sep else lo)
    except ValueError:
        raise ConfigError(f"--ratio {text!r}: expected LOW:HIGH prefill per decode, e.g. 0.25:1") from None


def _read_yaml(path: Path) -> Any:
    # Bounded like every profile: a regular file of at most 4 MiB, aliases counted as they expand.
    return read_yaml(path, str(path))[0]


def _client() -> httpx.AsyncClient:
    # The supervisor's endpoint is on 127.0.0.1: never through a proxy from the environment.
    return httpx.AsyncClient(timeout=10.0, trust_env=False)
