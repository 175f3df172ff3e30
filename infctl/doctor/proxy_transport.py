"""An httpx transport that sends a probe's requests to one Service through the API server's service proxy.

``router_cluster`` hands it to the router probe ``--router URL`` runs, so the checks are the same code; each
request to ``base_url`` becomes ``KubeRequester.request_raw`` on ``.../services/NAME:PORT/proxy/PATH`` and
the pod's answer (any status) comes back as the response. Requests to any other host (an engine URL the
router lists, reachable only inside the cluster) fail as unreachable, as they would from here.

No ``Authorization`` header reaches the pod: kube-apiserver deletes it once it has authenticated the caller
(k8s.io/apiserver pkg/endpoints/filters/authentication.go, ``req.Header.Del("Authorization")``), so a
bearer token for the pod cannot travel this way and is not sent.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any

import httpx

from infctl.doctor.cluster_probe import KubeRequester
from infctl.doctor.cluster_service import Found
from infctl.errors import KubeError


class ServiceProxyTransport(httpx.AsyncBaseTransport):
    """Requests to ``base_url`` sent to ``found`` through ``client``."""

    def __init__(self, client: KubeRequester, found: Found, base_url: str) -> None:
        self.client = client
        self.found = found
        self.host = httpx.URL(base_url).host

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != self.host:
            raise httpx.ConnectError(
                f"{request.url.host} is not reachable through the API server's proxy", request=request
            )
        body: Any = None
        content = await request.aread()
        if content:
            try:
                body = json.loads(content)
            except ValueError:
                body = content.decode("utf-8", errors="replace")
        query = {k: v for k, v in request.url.params.items()}
        send = partial(
            self.client.request_raw, request.method, self.found.path(request.url.path), query=query, body=body
        )
        try:
            status, kind, data = await asyncio.to_thread(send)
        except KubeError as err:
            raise httpx.ConnectError(err.message, request=request) from None
        headers = {"content-type": kind} if kind else {}
        return httpx.Response(status, headers=headers, content=data, request=request)
