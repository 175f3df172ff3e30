"""Where the daemon keeps its memory between restarts (:mod:`infctl.autoscaler.memory`): a file for the
local target, a ConfigMap on Kubernetes (the rendered ``<release>-autoscaler-memory``, which its Role may
read and patch and nothing else)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from infctl.errors import InfctlError, KubeError
from infctl.local.state import write_json_atomic

if TYPE_CHECKING:
    from infctl.kube import KubeClient

KEY = "memory.json"
"""The ConfigMap's data key."""


class MemoryStore(Protocol):
    where: str
    """For logs: the file or ConfigMap."""

    async def load(self) -> Any | None:
        """The saved record, or None when nothing was saved yet."""
        ...

    async def save(self, data: dict[str, Any]) -> None: ...


class FileStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    async def load(self) -> Any | None:
        try:
            text = await asyncio.to_thread(self.path.read_text)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise InfctlError(f"cannot read {self.path}: {err.strerror or err}") from None
        return _decode(text, self.where)

    async def save(self, data: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(write_json_atomic, self.path, data)
        except OSError as err:
            raise InfctlError(f"cannot write {self.path}: {err.strerror or err}") from None


class ConfigMapStore:
    def __init__(self, client: KubeClient, name: str, namespace: str | None = None) -> None:
        self.client, self.name = client, name
        ns = namespace or client.namespace
        self.path = f"/api/v1/namespaces/{ns}/configmaps/{name}"
        self.where = f"ConfigMap {ns}/{name}"

    async def load(self) -> Any | None:
        try:
            obj = await asyncio.to_thread(self.client.request, "GET", self.path)
        except KubeError as err:
            if err.status == 404:
                return None
            raise
        text = (obj.get("data") or {}).get(KEY)
        return None if text is None else _decode(text, self.where)

    async def save(self, data: dict[str, Any]) -> None:
        # A merge patch of one key: the ConfigMap is rendered with the release (its labels stay the render's).
        body = {"data": {KEY: json.dumps(data, separators=(",", ":"))}}
        await asyncio.to_thread(
            self.client.request, "PATCH", self.path, body=body, content_type="application/merge-patch+json"
        )


def _decode(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InfctlError(f"{where}: not JSON ({err.msg} at line {err.lineno})") from None
