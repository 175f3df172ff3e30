"""The HTTP clients of the local target, built in one place (injectable transports for tests)."""

from __future__ import annotations

import httpx

# Local processes listen on 127.0.0.1: a proxy from the environment must never intercept them.


def sync_client(*, timeout: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    return httpx.Client(timeout=timeout, transport=transport, trust_env=False)


def async_client(*, timeout: float, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False)


def probe(client: httpx.Client, url: str) -> bool:
    """True when ``url`` answers 200."""
    try:
        return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


async def aprobe(client: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await client.get(url)).status_code == 200
    except httpx.HTTPError:
        return False
