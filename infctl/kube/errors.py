"""Errors of the Kubernetes layer, each with its own exit code (subclasses of ``infctl.errors.KubeError``).

KubeError               1  the API server refused or failed a request (status and message kept)
├── KubeconfigError     2  no credentials to reach a cluster: no kubeconfig, an unreadable one, no such
│                          context, not in a pod (defined beside ``connect`` in ``infctl.kube.client``)
├── MissingCRDError     3  a kind the release needs is not served: its CRD is not installed
├── ApplyConflictError  4  server-side apply found fields owned by another manager (HTTP 409)
└── NotReadyError       5  workloads did not become ready before the timeout
"""

from __future__ import annotations

from infctl.errors import KubeError


class MissingCRDError(KubeError):
    """The cluster does not serve a custom kind the release renders."""

    exit_code = 3


class ApplyConflictError(KubeError):
    """Another field manager owns a field infctl applies; re-run with --force-conflicts to take it over."""

    exit_code = 4


class NotReadyError(KubeError):
    """The release's workloads were not ready within the timeout."""

    exit_code = 5
