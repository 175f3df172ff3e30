"""Render options that are not part of a deployment profile: image, traffic wiring, strictness."""

from __future__ import annotations

from dataclasses import dataclass

from infctl import __version__
from infctl.manifests.placement import AntiAffinity

DEFAULT_IMAGE = f"infctl:{__version__}"
"""The image built from the repository's Containerfile, which the router and autoscaler run."""


@dataclass(frozen=True)
class RenderOptions:
    """Everything ``infctl render`` and ``infctl deploy`` take besides the profile."""

    namespace: str = "default"
    """Namespace of every object (the profile's ``namespace`` wins when it has one)."""
    image: str = DEFAULT_IMAGE
    """infctl image for the router and autoscaler when the profile names none."""
    anti_affinity: AntiAffinity = "preferred"
    """Group mode: keep groups under different switches as a preference, or require it."""
    gateway: str = "inference-gateway"
    """Gateway the HTTPRoute attaches to: ``name`` or ``namespace/name``."""
    old_backend: str | None = None
    """The system being replaced, ``[namespace/]service:port``; gets the rest of the weight."""
    weight: int | None = None
    """Percent of traffic to the new system: default 100 alone, 0 when ``old_backend`` is set."""
    inference_pool_epp: str | None = None
    """Send traffic to an InferencePool picked by this endpoint-picker Service instead of the router."""
    traffic: bool = True
    """Render the HTTPRoute (Gateway API CRDs needed)."""
    monitoring: bool = True
    """Render PodMonitor, ServiceMonitor, PrometheusRule (Prometheus Operator CRDs needed) and dashboards."""
    ttft_slo_s: float = 2.0
    """TTFT objective for the burn-rate alert, seconds."""
    admin_token_secret: str | None = None
    """Secret (key ``token``) the router and autoscaler read the admin token from; None:
    ``<release>-router-admin``, which ``infctl deploy`` creates when missing. A named Secret must exist."""
