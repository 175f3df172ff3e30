"""Kubernetes manifests for a deployment profile: placement planning, Jinja2 rendering, schema validation.

Pure: nothing here talks to a cluster (that is ``infctl.kube``).

- :func:`plan_placement` -> :class:`PlacementPlan` (groups under one switch, pools, labels);
- :func:`render` -> plain dicts in apply order, :func:`to_yaml` / :func:`write_files` to print or save them;
- :func:`validate_objects` -> schema problems (kubernetes-validate for core kinds, ``crds/`` for the rest).
"""

from typing import TYPE_CHECKING

from infctl._lazy import lazy_exports

if TYPE_CHECKING:
    from infctl.manifests.kinds import KINDS, PHASE_NAMES, Kind, kind_of, lookup
    from infctl.manifests.options import DEFAULT_IMAGE, RenderOptions
    from infctl.manifests.placement import (
        AntiAffinity,
        PlacementPlan,
        WorkloadPlan,
        check_group_fits,
        plan_placement,
    )
    from infctl.manifests.render import dump, phase_of, render, to_yaml, write_files
    from infctl.manifests.validate import DEFAULT_K8S_VERSION, validate_objects

_MODULES: dict[str, str] = {
    "KINDS": "infctl.manifests.kinds",
    "PHASE_NAMES": "infctl.manifests.kinds",
    "Kind": "infctl.manifests.kinds",
    "kind_of": "infctl.manifests.kinds",
    "lookup": "infctl.manifests.kinds",
    "DEFAULT_IMAGE": "infctl.manifests.options",
    "RenderOptions": "infctl.manifests.options",
    "AntiAffinity": "infctl.manifests.placement",
    "PlacementPlan": "infctl.manifests.placement",
    "WorkloadPlan": "infctl.manifests.placement",
    "check_group_fits": "infctl.manifests.placement",
    "plan_placement": "infctl.manifests.placement",
    "dump": "infctl.manifests.render",
    "phase_of": "infctl.manifests.render",
    "render": "infctl.manifests.render",
    "to_yaml": "infctl.manifests.render",
    "write_files": "infctl.manifests.render",
    "DEFAULT_K8S_VERSION": "infctl.manifests.validate",
    "validate_objects": "infctl.manifests.validate",
}
"""Where each name lives. A name is imported on first use: the router reads only ``labels`` and
``admin_secret``, and importing the renderer (Jinja2, every profile model, the router's metrics and ZeroMQ
through the dashboards) cost ~0.15 s of its start-up."""


__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_K8S_VERSION",
    "KINDS",
    "PHASE_NAMES",
    "AntiAffinity",
    "Kind",
    "PlacementPlan",
    "RenderOptions",
    "WorkloadPlan",
    "check_group_fits",
    "dump",
    "kind_of",
    "lookup",
    "phase_of",
    "plan_placement",
    "render",
    "to_yaml",
    "validate_objects",
    "write_files",
]
