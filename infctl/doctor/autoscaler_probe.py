"""Probing a running autoscaler (``infctl autoscaler``) over HTTP; verdicts come from ``autoscaler_eval``.

On Kubernetes, ``autoscaler_cluster`` finds the release's autoscaler and reads the same ``/metrics`` through
the API server; both hand the text to :func:`checks_from_text`.
"""

from __future__ import annotations

import httpx

from infctl.doctor import autoscaler_eval as ev
from infctl.doctor.http import fetch
from infctl.doctor.result import CheckResult, failed
from infctl.errors import MetricsError
from infctl.telemetry import parse_metrics


async def check_autoscaler(client: httpx.AsyncClient, url: str) -> list[CheckResult]:
    """Whether the start-ups the autoscaler at ``url`` measured fit in the router's hold, and whether it
    saves its memory."""
    answer = await fetch(client, "GET", url.rstrip("/") + "/metrics")
    if answer.status != 200:
        found = answer.error if answer.status is None else f"HTTP {answer.status}"
        return [
            failed(
                ev.G,
                "startup",
                f"GET /metrics: {found}",
                "check that the autoscaler runs and the URL (its --host:--port; on Kubernetes: "
                "kubectl port-forward svc/RELEASE-autoscaler 9464, or let infctl doctor -f PROFILE find it)",
                target=url,
            )
        ]
    return checks_from_text(answer.text, target=url)


def checks_from_text(text: str, *, target: str) -> list[CheckResult]:
    """The start-up and memory verdicts on an autoscaler's ``/metrics`` text, however it was fetched."""
    try:
        families = parse_metrics(text, ev.WANTED)
    except MetricsError as err:
        found = f"GET /metrics: {err.message}"
        return [failed(ev.G, "startup", found, "is this an infctl autoscaler?", target=target)]
    return [ev.evaluate_startup(families, target=target), ev.evaluate_memory(families, target=target)]
