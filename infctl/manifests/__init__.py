"""Kubernetes manifests for a deployment profile: placement planning, Jinja2 rendering, schema validation.

Pure: nothing here talks to a cluster (that is ``infctl.kube``).

- :func:`plan_placement` -> :class:`PlacementPlan` (groups under one switch, pools, labels);
- :func:`render` -> plain dicts in apply order, :func:`to_yaml` / :func:`write_files` to print or save them;
- :func:`validate_objects` -> schema problems (kubernetes-validate for core kinds, ``crds/`` for the rest).
"""

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
