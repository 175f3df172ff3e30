"""The one HTTP helper doctor's probes share: an exchange becomes data, whatever happened."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange: status (None when no connection), parsed body, or what went wrong."""

    status: int | None
    body: Any = None
    text: str = ""
    error: str | None = None
    elapsed_s: float = 0.0


async def fetch(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: Any = None,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One request; never raises for HTTP or connection trouble (it is what doctor reports)."""
    started = time.monotonic()
    headers = {**(headers or {}), **({"authorization": f"Bearer {token}"} if token else {})} or None
    try:
        resp = await client.request(method, url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        return Answer(None, error=f"{type(exc).__name__}: {exc}".rstrip(": "))
    text = resp.content.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return Answer(resp.status_code, parsed, text, elapsed_s=time.monotonic() - started)
