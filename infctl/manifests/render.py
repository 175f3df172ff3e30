"""Render a deployment profile into Kubernetes objects through the Jinja2 templates in ``templates/``.

``render(profile, options)`` returns plain dicts in apply order; :func:`to_yaml` and :func:`write_files`
turn them into the multi-document stream or one file per object. Rendering is pure: same profile and
options, same bytes (the golden tests hold it to that).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from infctl.config import DeploymentProfile
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.context import autoscaler_context, monitoring_context, router_context, traffic_context
from infctl.manifests.engine import ENGINE_PORT, engine_values
from infctl.manifests.gang import pod_groups
from infctl.manifests.group_set import dispatch_values, set_objects
from infctl.manifests.keda import scaled_objects
from infctl.manifests.kinds import kind_of
from infctl.manifests.kv_pool import COMPONENT as POOL_COMPONENT
from infctl.manifests.kv_pool import pool_values, with_pool_address
from infctl.manifests.options import RenderOptions
from infctl.manifests.placement import PlacementPlan, WorkloadPlan, plan_placement

Obj = dict[str, Any]
COMPONENT_PHASE = {
    POOL_COMPONENT: 2,
    "engine": 2,
    "router": 3,
    "autoscaler": 4,
    "traffic": 5,
    "monitoring": 6,
}


def templates_dir() -> Path:
    """``$INFCTL_TEMPLATES``, else ``templates/`` beside the package (a source checkout or the image)."""
    env = os.environ.get("INFCTL_TEMPLATES")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    candidates += [here.parent.parent / "templates", here.parent / "_templates"]
    for path in candidates:
        if (path / "_helpers.j2").is_file():
            return path
    raise ConfigError(
        "cannot find infctl's templates directory",
        hint="set INFCTL_TEMPLATES to the templates/ folder of an infctl checkout",
    )


@cache
def _environment(directory: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["toyaml"] = _toyaml
    env.filters["nindent"] = lambda text, n: (
        "\n" + "\n".join(" " * n + line for line in str(text).splitlines())
    )
    return env


def _toyaml(value: Any) -> str:
    return yaml.safe_dump(_plain(value), sort_keys=False, default_flow_style=False, width=10_000).rstrip("\n")


def _plain(value: Any) -> Any:
    """Mappings and tuples from the plans as the dicts and lists YAML dumps."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render(profile: DeploymentProfile, options: RenderOptions | None = None) -> list[Obj]:
    """Every object of ``profile``'s release in apply order (config, engines, router, traffic, monitoring)."""
    opts = options or RenderOptions()
    if profile.target != "kubernetes" or profile.cluster is None:
        raise ConfigError(
            f"profile {profile.name!r} targets {profile.target!r}; only kubernetes profiles render manifests",
            hint="set target: kubernetes and a cluster profile, or run it with infctl deploy --target local",
        )
    namespace = profile.namespace or opts.namespace
    # Engines reach a rendered KV pool at its Services' names, as they would a running pool's address.
    profile = with_pool_address(profile, namespace)
    plan = plan_placement(profile, anti_affinity=opts.anti_affinity)
    env = _environment(templates_dir())
    docs: list[str] = []
    if profile.cluster is not None and profile.cluster.create_namespace:
        docs.append(yaml.safe_dump(namespace_object(profile, namespace), sort_keys=False))
    pool = pool_values(profile, namespace)
    if pool:
        docs.append(env.get_template("kv-pool.yaml.j2").render(pool=pool, namespace=namespace))
    # A gang scheduler's PodGroups exist before the pods that name them.
    docs += [yaml.safe_dump(g, sort_keys=False) for g in pod_groups(profile, plan, namespace)]
    for w in plan.workloads:
        docs.append(_workload(env, profile, w, namespace))
        docs.append(
            env.get_template("engine-service.yaml.j2").render(w=w, namespace=namespace, ports=_svc_ports(w))
        )
    if profile.router.enabled:
        docs.append(
            env.get_template("router.yaml.j2").render(
                r=router_context(profile, plan, namespace, opts), namespace=namespace
            )
        )
    scaled = None  # the autoscaler's file when one is rendered (monitored and alerted on)
    if profile.autoscaler.enabled:
        scaler = autoscaler_context(profile, plan, namespace, opts)
        if scaler["file"]["targets"]:  # none left when KEDA scales every autoscaled workload
            docs.append(env.get_template("autoscaler.yaml.j2").render(a=scaler, namespace=namespace))
            scaled = scaler["file"]
        docs += [yaml.safe_dump(o, sort_keys=False) for o in keda_objects(profile, plan, namespace, opts)]
    if opts.traffic:
        docs.append(
            env.get_template("traffic.yaml.j2").render(
                t=traffic_context(profile, namespace, opts), namespace=namespace
            )
        )
    if opts.monitoring:
        docs.append(
            env.get_template("monitoring.yaml.j2").render(
                m=monitoring_context(profile, namespace, opts, plan, scaled), namespace=namespace
            )
        )
    objects = [o for text in docs for o in yaml.safe_load_all(text) if o]
    return sorted(objects, key=phase_of)  # stable: template order within a phase


def keda_objects(
    profile: DeploymentProfile, plan: PlacementPlan, namespace: str, opts: RenderOptions
) -> list[Obj]:
    """KEDA's ScaledObjects (``scale_to_zero.scaler: keda``); their triggers read what the monitoring
    objects make Prometheus scrape."""
    objects = scaled_objects(profile, plan, namespace)
    if objects and not opts.monitoring:
        raise ConfigError(
            "scale_to_zero.scaler keda reads the router's and engines' metrics from Prometheus, which "
            "scrapes them through the ServiceMonitor and PodMonitor render writes; found --no-monitoring",
            hint="render with monitoring, or use scaler: infctl (it reads the router directly)",
        )
    return objects


def namespace_object(profile: DeploymentProfile, namespace: str) -> Obj:
    """The release's Namespace (``cluster.create_namespace``); never pruned with the release, as its
    deletion would take everything else in it."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {L.MANAGED_BY: L.MANAGER, L.PART_OF: L.PART_OF_VALUE}},
    }


def _workload(env: jinja2.Environment, profile: DeploymentProfile, w: WorkloadPlan, namespace: str) -> str:
    cluster = profile.cluster
    assert cluster is not None
    pod = {
        "node_selector": dict(cluster.node_selector),
        "tolerations": [t.model_dump(exclude_none=True) for t in cluster.tolerations],
    }
    if w.members is not None:  # a PD-group set: every LWS group is one PD group
        return env.get_template("engine-lws.yaml.j2").render(
            w=w,
            lws=set_objects(profile, w),
            leader=dispatch_values(profile, w, leader=True),
            worker=dispatch_values(profile, w, leader=False),
            pod=pod,
            namespace=namespace,
        )
    leader = engine_values(profile, w, leader=True)
    if w.multi_node:
        worker = engine_values(profile, w, leader=False)
        lws = {
            "size": w.nodes_per_replica,
            "sub_group_size": None,
            "labels": w.pod_labels,
            "annotations": w.annotations,
        }
        return env.get_template("engine-lws.yaml.j2").render(
            w=w, lws=lws, leader=leader, worker=worker, pod=pod, namespace=namespace
        )
    return env.get_template("engine-deployment.yaml.j2").render(
        w=w, leader=leader, pod=pod, namespace=namespace
    )


def _svc_ports(w: WorkloadPlan) -> list[Obj]:
    return [{"name": "http", "port": ENGINE_PORT, "targetPort": "http"}]


def phase_of(obj: Obj) -> int:
    """Apply phase of a rendered object (see :data:`infctl.manifests.kinds.PHASE_NAMES`)."""
    kind = kind_of(obj)
    if kind.phase <= 1:
        return kind.phase
    component = obj.get("metadata", {}).get("labels", {}).get(L.COMPONENT, "")
    return COMPONENT_PHASE.get(component, kind.phase)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (config files, dashboards) as literal blocks, so they read as the files they are."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(c in value for c in "\t\r") and not value.endswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Obj) -> str:
    """One object as YAML, keys in template order, long strings unwrapped."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=10_000)


def to_yaml(objects: Iterable[Obj]) -> str:
    """One multi-document YAML stream."""
    return "---\n".join(dump(o) for o in objects)


def file_name(index: int, obj: Obj) -> str:
    """``03-deployment-qwen3-8b-engine.yaml``: apply order first, so ``kubectl apply -f DIR`` keeps it."""
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def write_files(objects: list[Obj], directory: Path) -> list[Path]:
    """One file per object in ``directory`` (created); returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, obj in enumerate(objects):
        path = directory / file_name(i, obj)
        path.write_text(dump(obj))
        paths.append(path)
    return paths


def remove_stale(objects: list[Obj], directory: Path) -> list[Path]:
    """Remove, and return, the files in ``directory`` an earlier :func:`write_files` of the same releases
    left and this one did not write: objects the profile no longer renders, or renumbered ones. Else
    ``kubectl apply -f DIR`` applies them too. A file is removed only when it holds one object labelled as
    managed by infctl for one of these releases; anything else in the directory is left alone."""
    releases = {o["metadata"].get("labels", {}).get(L.RELEASE) for o in objects} - {None}
    current = {file_name(i, o) for i, o in enumerate(objects)}
    removed = []
    for path in sorted(directory.glob("*.yaml")):
        if path.name in current or not path.is_file():
            continue
        try:
            obj = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        labels = obj.get("metadata", {}).get("labels", {}) if isinstance(obj, dict) else {}
        if (
            isinstance(labels, dict)
            and labels.get(L.MANAGED_BY) == L.MANAGER
            and labels.get(L.RELEASE) in releases
        ):
            path.unlink()
            removed.append(path)
    return removed
