"""The one place an API client is built, and the one request function everything else goes through.

``connect(settings)`` reads the kubeconfig (file and context from the global options, else ``$KUBECONFIG``,
else ``~/.kube/config``, else in-cluster service-account credentials), or raises :class:`KubeconfigError`
(exit 2: the environment to fix) naming what it looked for; tests pass their own ``Configuration``
pointing at a fake API server. Requests are generic (path, verb, JSON body), so every kind, core or custom,
goes through :meth:`KubeClient.request`; failures become :class:`KubeError` with the server's status and
message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import kubernetes.client
import kubernetes.config
import urllib3
import yaml

from infctl.errors import KubeError

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"


class RawAnswer(NamedTuple):
    """What a pod answered through the API server's proxy (:meth:`KubeClient.request_raw`)."""

    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True)
class ClientSettings:
    """Where the API server is and which namespace to use (from ``infctl``'s global options)."""

    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None
    timeout_s: float = 30.0
    """Per-request timeout, seconds."""


class KubeClient:
    """A thin, typed-enough wrapper over the official client's ``ApiClient``."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, timeout_s: float = 30.0) -> None:
        self.api = api
        self.namespace = namespace
        """The namespace commands default to."""
        self.timeout_s = timeout_s

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """Send one request; the decoded JSON answer, or KubeError with the server's status and message."""
        return _decode(self._send(method, path, query, body, content_type, JSON))

    def request_text(self, method: str, path: str, *, query: dict[str, str] | None = None) -> str:
        """Send one request whose answer is not JSON (a pod's Prometheus text through the API server's
        service proxy, ``.../services/NAME:PORT/proxy/metrics``); the text, or KubeError as ``request``."""
        return (self._send(method, path, query, None, JSON, "*/*") or b"").decode("utf-8", errors="replace")

    def request_raw(
        self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None
    ) -> RawAnswer:
        """Send one request through the API server to a pod (``.../services/NAME:PORT/proxy/PATH``) and
        return its answer whatever the status: the proxy passes the pod's own 401s and 503s on, and they
        are the caller's data. ``body``: JSON-able. KubeError only when the API server is not reached."""
        response = self._call(method, path, query, body, JSON, "*/*")
        kind = str(response.headers.get("Content-Type", ""))
        return RawAnswer(response.status, kind, response.data or b"")

    def _send(
        self, method: str, path: str, query: dict[str, str] | None, body: Any, content_type: str, accept: str
    ) -> bytes | None:
        response = self._call(method, path, query, body, content_type, accept)
        if response.status >= 400:
            raise api_error(method, path, response.status, _decode(response.data))
        data: bytes | None = response.data
        return data

    def _call(
        self, method: str, path: str, query: dict[str, str] | None, body: Any, content_type: str, accept: str
    ) -> Any:
        headers = {"Accept": accept, "Content-Type": content_type}
        method, url, headers, body, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=self.timeout_s
            )
            response.read()  # type: ignore[no-untyped-call]
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise KubeError(
                f"cannot reach the Kubernetes API server at {self.host}: {err}",
                hint="check the kubeconfig context (--context) and that the cluster is up",
            ) from None
        return response

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]


def _decode(raw: bytes | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {"message": raw.decode(errors="replace")[:300]}
    return data if isinstance(data, dict) else {"items": data}


def api_error(method: str, path: str, status: int, data: dict[str, Any]) -> KubeError:
    """KubeError carrying what the server said (its Status message and reason)."""
    message = str(data.get("message") or data.get("reason") or "no message")
    hints = {
        401: "the kubeconfig credentials were refused: log in again",
        403: "your user lacks RBAC permission for this; ask for it or use another context",
        404: "the object or its kind does not exist in the cluster",
        409: "someone else changed it first; re-run",
        422: "the object is invalid for this cluster: check it with infctl render --validate",
    }
    return KubeError(f"{method} {path}: {status} {message}", status=status, hint=hints.get(status))


class KubeconfigError(KubeError):
    """No credentials to reach a cluster with (no kubeconfig found, none readable, no such context, not
    inside a pod): the environment to fix before anything is sent, so exit 2 like bad input (docs/cli.md),
    not 1 like a request the API server refused."""

    exit_code = 2


def connect(
    settings: ClientSettings, configuration: kubernetes.client.Configuration | None = None
) -> KubeClient:
    """A client for ``settings``; ``configuration`` (tests) bypasses the kubeconfig entirely.

    The kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG`` (a list, as kubectl reads it), else
    ``~/.kube/config``; without one, the pod's service account when running in a cluster; else
    :class:`KubeconfigError` naming what was looked for."""
    if configuration is not None:
        return KubeClient(
            kubernetes.client.ApiClient(configuration), settings.namespace or "default", settings.timeout_s
        )
    cfg = kubernetes.client.Configuration()
    paths = _kubeconfig_paths(settings.kubeconfig)
    found = [p for p in paths if p.is_file()]
    namespace = settings.namespace
    flag = _flag_given(settings.kubeconfig)
    if not found and (flag or not os.environ.get("KUBERNETES_SERVICE_HOST")):
        raise _no_kubeconfig(settings.kubeconfig if flag else None, paths)
    try:
        if found:
            config_file = os.pathsep.join(map(str, found))
            kubernetes.config.load_kube_config(config_file, settings.context, client_configuration=cfg)  # type: ignore[no-untyped-call]
            namespace = namespace or _context_namespace(config_file, settings.context)
        else:
            kubernetes.config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            namespace = namespace or _incluster_namespace()
    except (kubernetes.config.ConfigException, yaml.YAMLError, OSError) as err:
        where = ", ".join(map(str, found)) if found else "the in-cluster service account"
        raise KubeconfigError(
            f"cannot load Kubernetes credentials from {where}: {' '.join(str(err).split())}",
            hint="check the file and the context (kubectl config get-contexts), or pass --kubeconfig FILE "
            "and --context NAME",
        ) from None
    return KubeClient(kubernetes.client.ApiClient(cfg), namespace or "default", settings.timeout_s)


def _kubeconfig_paths(given: Path | None) -> list[Path]:
    """The files the kubeconfig is read from, as kubectl reads them: ``given`` or ``$KUBECONFIG`` (both may
    list several, ``:``-separated; the CLI passes ``$KUBECONFIG`` as ``--kubeconfig``), else
    ``~/.kube/config``. Read at call time: the client library reads ``$KUBECONFIG`` once, at import."""
    text = str(given) if given is not None else os.environ.get("KUBECONFIG", "")
    listed = [Path(p).expanduser() for p in text.split(os.pathsep) if p]
    return listed or [Path("~/.kube/config").expanduser()]


def _flag_given(given: Path | None) -> bool:
    """Whether ``--kubeconfig`` itself was given (kubectl then never falls back to the pod's account)."""
    return given is not None and str(given) != os.environ.get("KUBECONFIG")


def _no_kubeconfig(flag: Path | None, paths: list[Path]) -> KubeconfigError:
    if flag is not None:
        return KubeconfigError(
            f"--kubeconfig {flag}: no such file",
            hint="name an existing file, or leave --kubeconfig out to use $KUBECONFIG or ~/.kube/config",
        )
    looked = ", ".join(map(str, paths))
    source = f"$KUBECONFIG ({looked})" if os.environ.get("KUBECONFIG") else looked
    return KubeconfigError(
        f"no kubeconfig: nothing at {source}, and not running inside a cluster",
        hint="pass --kubeconfig FILE (and --context NAME), or set KUBECONFIG",
    )


def _context_namespace(config_file: str | None, context: str | None) -> str | None:
    contexts, current = kubernetes.config.list_kube_config_contexts(config_file)  # type: ignore[no-untyped-call]
    chosen = next((c for c in contexts if c["name"] == context), current) if context else current
    ns = (chosen or {}).get("context", {}).get("namespace")
    return str(ns) if ns else None


def _incluster_namespace() -> str | None:
    path = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    return path.read_text().strip() if path.is_file() else None
