"""Talking to a Kubernetes cluster: the only package that imports ``kubernetes``.

- :func:`connect` builds the client (kubeconfig, context, namespace; an injectable ``Configuration``);
- :func:`deploy_release` applies rendered objects with server-side apply in phase order, waits, prunes;
  :func:`diff_release`, :func:`release_status`, :func:`delete_release` for the other commands;
- :func:`ensure_admin_secret`: the router's admin-token Secret, created when missing (deploy calls it);
- :func:`scale` (the ``/scale`` subresource) and :func:`patch_httproute_weights` (optimistic concurrency)
  for the autoscaler and cutover.
"""

from typing import TYPE_CHECKING

from infctl._lazy import lazy_exports

if TYPE_CHECKING:
    from infctl.kube.apply import FIELD_MANAGER, Applied, DryRun, apply_object, ensure_namespace
    from infctl.kube.client import APPLY_PATCH, ClientSettings, KubeClient, KubeconfigError, connect
    from infctl.kube.errors import ApplyConflictError, MissingCRDError, NotReadyError
    from infctl.kube.prune import list_release, stale
    from infctl.kube.release import (
        DeployOptions,
        DeployReport,
        ObjectDiff,
        delete_release,
        deploy_release,
        diff_release,
        release_status,
    )
    from infctl.kube.resources import check_crds
    from infctl.kube.scale import patch_httproute_weights, scale, set_weights
    from infctl.kube.secrets import AdminSecret, ensure_admin_secret
    from infctl.kube.wait import Readiness, readiness, wait_ready

_MODULES: dict[str, str] = {
    "FIELD_MANAGER": "infctl.kube.apply",
    "Applied": "infctl.kube.apply",
    "DryRun": "infctl.kube.apply",
    "apply_object": "infctl.kube.apply",
    "ensure_namespace": "infctl.kube.apply",
    "APPLY_PATCH": "infctl.kube.client",
    "ClientSettings": "infctl.kube.client",
    "KubeClient": "infctl.kube.client",
    "KubeconfigError": "infctl.kube.client",
    "connect": "infctl.kube.client",
    "ApplyConflictError": "infctl.kube.errors",
    "MissingCRDError": "infctl.kube.errors",
    "NotReadyError": "infctl.kube.errors",
    "list_release": "infctl.kube.prune",
    "stale": "infctl.kube.prune",
    "DeployOptions": "infctl.kube.release",
    "DeployReport": "infctl.kube.release",
    "ObjectDiff": "infctl.kube.release",
    "delete_release": "infctl.kube.release",
    "deploy_release": "infctl.kube.release",
    "diff_release": "infctl.kube.release",
    "release_status": "infctl.kube.release",
    "check_crds": "infctl.kube.resources",
    "patch_httproute_weights": "infctl.kube.scale",
    "scale": "infctl.kube.scale",
    "set_weights": "infctl.kube.scale",
    "AdminSecret": "infctl.kube.secrets",
    "ensure_admin_secret": "infctl.kube.secrets",
    "Readiness": "infctl.kube.wait",
    "readiness": "infctl.kube.wait",
    "wait_ready": "infctl.kube.wait",
}
"""Where each name lives. A name is imported on first use: the router's discovery needs only ``client``
and ``watch``, not the rest (apply and release import the renderer, Jinja2 and every profile model)."""

__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "APPLY_PATCH",
    "FIELD_MANAGER",
    "AdminSecret",
    "Applied",
    "ApplyConflictError",
    "ClientSettings",
    "DeployOptions",
    "DeployReport",
    "DryRun",
    "KubeClient",
    "KubeconfigError",
    "MissingCRDError",
    "NotReadyError",
    "ObjectDiff",
    "Readiness",
    "apply_object",
    "check_crds",
    "connect",
    "delete_release",
    "deploy_release",
    "diff_release",
    "ensure_admin_secret",
    "ensure_namespace",
    "list_release",
    "patch_httproute_weights",
    "readiness",
    "release_status",
    "scale",
    "set_weights",
    "stale",
    "wait_ready",
]
