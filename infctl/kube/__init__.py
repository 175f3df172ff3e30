"""Talking to a Kubernetes cluster: the only package that imports ``kubernetes``.

- :func:`connect` builds the client (kubeconfig, context, namespace; an injectable ``Configuration``);
- :func:`deploy_release` applies rendered objects with server-side apply in phase order, waits, prunes;
  :func:`diff_release`, :func:`release_status`, :func:`delete_release` for the other commands;
- :func:`ensure_admin_secret`: the router's admin-token Secret, created when missing (deploy calls it);
- :func:`scale` (the ``/scale`` subresource) and :func:`patch_httproute_weights` (optimistic concurrency)
  for the autoscaler and cutover.
"""

from infctl.kube.apply import FIELD_MANAGER, Applied, DryRun, apply_object, ensure_namespace
from infctl.kube.client import APPLY_PATCH, ClientSettings, KubeClient, connect
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
