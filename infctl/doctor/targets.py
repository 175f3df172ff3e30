"""What doctor is asked to look at, resolved to plain records before any I/O starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infctl.config import DeploymentProfile


@dataclass(frozen=True)
class EngineTarget:
    """One engine endpoint and what it is expected to be."""

    url: str
    """Base URL, e.g. ``http://10.0.0.7:8000``."""
    engine: str | None = None
    """Adapter name (``ModelProfile.engine``); None: told from its /metrics or load endpoint."""
    model: str | None = None
    """Served model name the engine must list in /v1/models; None: whatever it serves."""
    role: str = "both"
    """prefill, decode or both: a parallel-style PD engine (SGLang) answers only paired requests."""
    kv_events: str | None = None
    """ZMQ endpoint of its KV events (``tcp://host:port``); None: not published, or not known."""
    prefix_caching: bool = True
    """Whether prefix caching should be on (the profile's ``enable_prefix_caching``)."""
    precise: bool = False
    """The router builds its prefix index from KV events: they must arrive."""
    data_parallel_size: int = 1
    """Ranks served behind ``url``; each publishes its KV events at ``kv_events`` + its rank."""


@dataclass(frozen=True)
class RouterTarget:
    url: str
    admin_token: str | None = None
    """Bearer token for /admin/* (INFCTL_ROUTER_ADMIN_TOKEN)."""


@dataclass(frozen=True)
class DoctorRequest:
    """Everything one ``infctl doctor`` run checks. Empty fields are not checked."""

    profile: DeploymentProfile | None = None
    engines: tuple[EngineTarget, ...] = ()
    router: RouterTarget | None = None
    autoscaler: str | None = None
    """URL of a running autoscaler's /metrics server (its ``--host:--port``); None: a local release's own,
    or on a cluster the profile's, found by the Service it renders."""
    cluster: bool = False
    """Run the cluster checks (implied by a kubernetes-target profile)."""
    namespace: str | None = None
    """Namespace whose permissions are reviewed; None: the profile's, else the kubeconfig context's."""
    local_release: str | None = None
    """A local release whose state, engines and router are checked."""
    run_dir: Path | None = None
    """Where local releases keep state; None: the profile's local.run_dir, else the per-user default
    (``infctl.local.paths``)."""

    @property
    def checks_cluster(self) -> bool:
        return self.cluster or (self.profile is not None and self.profile.target == "kubernetes")

    @property
    def checks_local(self) -> bool:
        return self.local_release is not None or (self.profile is not None and self.profile.target == "local")
