"""How long the Gateway lets one request run: the ``timeouts`` of the HTTPRoute's rule.

An LLM answer streams for minutes, and a Gateway left to its defaults cuts it: Envoy Gateway programs no
route timeout when the route names none, so Envoy's own 15 s applies to the whole response (Envoy
Gateway ``internal/gatewayapi/route.go``, ``processRouteTimeout``; envoyproxy/gateway#1169). Gateway API
v1.2 made ``rules[].timeouts`` Standard (GEP-1742, features HTTPRouteRequestTimeout and
HTTPRouteBackendTimeout, both Extended): ``request`` bounds the whole exchange, ``backendRequest`` one
attempt against a backend and may not exceed ``request`` (a CEL rule of the CRD). Neither is an idle
timeout: the standard has none. Envoy Gateway stretches its route idle timeout to at least ``request``
when no ClientTrafficPolicy sets ``streamIdleTimeout`` (``internal/xds/translator/route.go``,
``idleTimeout``); docs/gateway.md says what to do when one does.

GKE's gke-l7 classes refuse a route with ``timeouts`` (kserve/kserve#5311) and end a response after the
backend service's timeout, 30 s unless a GCPBackendPolicy sets ``default.timeoutSec``
(GoogleCloudPlatform/gke-gateway-api ``GCPBackendPolicyConfig``): for ``cluster.gateway: gke`` the same
bound goes there instead, on each of the route's backends (the router's Service, or the InferencePool, and
during a cutover the old system's Service when it shares the release's namespace).

The longest request is derived, not configured: an engine's requests may run ``drain.timeout_s`` (what a
scale-in waits for them), and in front of the engines the router holds a request at most its admission
deadline, or ``hold_when_empty_s`` while a scaled-to-zero pool starts. llm-d's guides disable both
timeouts (``0s``) instead; a bound that matches the deployment still ends a request nothing answers.
"""

from __future__ import annotations

import math
from typing import Any

from infctl.config import DeploymentProfile
from infctl.config.router import router_default
from infctl.config.scale_to_zero import hold_when_empty_s
from infctl.errors import ConfigError

_MAX_PART = 99_999
"""GEP-2257: a Gateway API Duration is 1 to 4 parts of up to 5 digits and a unit (h, m, s, ms)."""


def longest_request_s(profile: DeploymentProfile, via_router: bool) -> float:
    """Seconds one request may take from the Gateway's side: the engine's ``drain.timeout_s``, plus the
    router's longest hold when the route sends traffic through the router."""
    if not via_router:
        return float(profile.drain.timeout_s)
    wait = max(float(router_default("admission_deadline_s")), hold_when_empty_s(profile) or 0.0)
    return profile.drain.timeout_s + wait


def gateway_duration(seconds: float) -> str:
    """``seconds`` rounded up to whole seconds as a Gateway API Duration: ``10m30s``, ``1h``, ``45s``."""
    total = math.ceil(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours > _MAX_PART:
        raise ConfigError(f"a request timeout of {total} s is beyond a Gateway API Duration ({_MAX_PART} h)")
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or "0s"


def _on_gke(profile: DeploymentProfile) -> bool:
    return profile.cluster is not None and profile.cluster.gateway == "gke"


def route_timeouts(profile: DeploymentProfile, via_router: bool) -> dict[str, str] | None:
    """The rule's ``timeouts``: ``request`` and ``backendRequest`` both the longest request (the Gateway
    makes one attempt; the router retries before the first byte itself). None where the Gateway refuses
    the field (``cluster.gateway: gke``)."""
    if _on_gke(profile):
        return None
    limit = gateway_duration(longest_request_s(profile, via_router))
    return {"request": limit, "backendRequest": limit}


def gke_backend_timeout(
    profile: DeploymentProfile, target: dict[str, str], via_router: bool
) -> dict[str, Any] | None:
    """For ``cluster.gateway: gke``, a GCPBackendPolicy's ``targetRef`` (one of the route's backends:
    ``group``, ``kind``, ``name``) and ``timeoutSec``, the longest request in whole seconds; else None."""
    if not _on_gke(profile):
        return None
    return {"target_ref": target, "timeout_sec": math.ceil(longest_request_s(profile, via_router))}
