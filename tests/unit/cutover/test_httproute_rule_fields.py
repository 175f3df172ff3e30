"""A cutover step on an HTTPRoute changes weights and nothing else of the rule: the merge patch replaces
``spec.rules`` whole (RFC 7386 replaces arrays), so it must carry the rule's timeouts and matches back."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, cast

from infctl.config import load_deployment
from infctl.cutover import HTTPRouteBackend
from infctl.cutover.ops import set_percent
from infctl.kube import KubeClient
from infctl.manifests import RenderOptions, render

QWEN = Path(__file__).resolve().parents[3] / "profiles" / "qwen3-8b-aggregated.yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class StoredRoute:
    """Stands in for the API server's one HTTPRoute: GET returns it, a merge PATCH is applied to it."""

    def __init__(self, route: dict[str, Any]) -> None:
        self.route = {**route, "metadata": {**route["metadata"], "resourceVersion": "1"}}

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        if method == "PATCH":
            self.route = merge_patch(self.route, body)
            self.route["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.route)


async def test_a_step_keeps_the_rendered_timeouts_and_matches() -> None:
    objs = render(load_deployment(QWEN), RenderOptions(old_backend="legacy/llm-gateway:80"))
    rendered = next(o for o in objs if o["kind"] == "HTTPRoute")
    stored = StoredRoute(rendered)
    backend = HTTPRouteBackend(cast(KubeClient, stored), "qwen3-8b", "inference")
    await set_percent(backend, 25, old=None, new=None, now=1.0, actor="ci")
    before, after = rendered["spec"]["rules"][0], stored.route["spec"]["rules"][0]
    assert after["timeouts"] == before["timeouts"] == {"request": "10m30s", "backendRequest": "10m30s"}
    assert after["matches"] == before["matches"]
    weights = {r["name"]: r["weight"] for r in after["backendRefs"]}
    assert weights == {"qwen3-8b-router": 25, "llm-gateway": 75}
