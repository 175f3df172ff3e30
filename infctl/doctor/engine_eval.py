"""Pure verdicts on what an engine answered: health, models, metrics, prefix caching, a tiny completion,
the KV side channel a sequential-style PD prefill names.

Every function takes what was fetched (statuses, parsed bodies, parsed /metrics) and returns findings;
``engine_probe`` does the fetching. Tests feed these functions text fixtures.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.engines import ENGINES, EngineAdapter
from infctl.hosts import is_loopback
from infctl.telemetry import MetricFamilies

G: Group = "engines"
_UNREACHABLE_FIX = "check that the engine runs (infctl status, kubectl get pods) and the URL's host and port"


def detect_engine(families: MetricFamilies) -> str | None:
    """The adapter whose metric names the payload carries most of; None when none matches."""
    hits = {name: sum(n in families for n in a.wanted_metrics) for name, a in ENGINES.items()}
    best = max(hits, key=lambda n: hits[n], default=None)
    return best if best is not None and hits[best] > 0 else None


def evaluate_health(
    adapter: EngineAdapter,
    status: int | None,
    *,
    deep_status: int | None = None,
    error: str | None = None,
    target: str = "",
) -> CheckResult:
    """What the health status means for this engine (``HealthSpec.state``), with the deep probe's word."""
    path = adapter.health.path
    if status is None:
        return failed(G, "health", f"GET {path}: {error or 'no answer'}", _UNREACHABLE_FIX, target=target)
    state = adapter.health.state(status)
    if state == "ready":
        return passed(G, "health", f"{adapter.name} ready (GET {path}: 200)", target=target)
    if state == "dead":
        return failed(
            G,
            "health",
            f"GET {path}: HTTP {status}: the {adapter.name} engine died and will not recover",
            "restart it; the end of its log says why the engine core died",
            target=target,
        )
    deep = adapter.health.deep_path
    if state == "starting" and deep is not None and deep_status is not None and deep_status != 200:
        return failed(
            G,
            "health",
            f"GET {path}: HTTP {status} and GET {deep}: HTTP {deep_status}: cannot generate",
            "restart the engine if it has been up past its warm-up; its log says what failed",
            target=target,
        )
    if state == "starting":
        return warned(
            G,
            "health",
            f"GET {path}: HTTP {status}: {adapter.name} is still loading or warming up",
            "wait for the model to load, then run doctor again",
            target=target,
        )
    return failed(
        G, "health", f"GET {path}: HTTP {status}: unhealthy", "read the engine's log", target=target
    )


def evaluate_models(body: object, expected: str | None, *, target: str = "") -> CheckResult:
    """``/v1/models`` lists the served name clients (and the router) put in ``model``."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return failed(
            G,
            "models",
            f"GET /v1/models answered {str(body)[:80]!r}",
            "is this an OpenAI-compatible server?",
            target=target,
        )
    ids = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
    if not ids:
        return failed(G, "models", "GET /v1/models lists no model", "check the engine's log", target=target)
    if expected is not None and expected not in ids:
        return failed(
            G,
            "models",
            f"serves {', '.join(ids)}, not {expected!r}",
            f"start the engine with --served-model-name {expected}, or fix the profile's served_model_name",
            target=target,
        )
    return passed(G, "models", f"serves {', '.join(ids)}", target=target)


def _present(families: MetricFamilies, name: str) -> bool:
    return name in families or f"{name}_count" in families


def evaluate_metrics(
    families: MetricFamilies, adapter: EngineAdapter, *, metrics_on: bool | None = None, target: str = ""
) -> list[CheckResult]:
    """The signals router and autoscaler read are there, under current names; deprecated ones flagged."""
    info = adapter.diagnostics
    if not families:
        fix = info.metrics_flag_fix if metrics_on is False else adapter.metrics_hint
        return [failed(G, "metrics", "/metrics carries no sample at all", fix, target=target)]
    missing: list[str] = []
    optional: list[str] = []
    for sig in info.signals:
        if not any(_present(families, m) for m in sig.metrics):
            (missing if sig.required else optional).append(f"{sig.name} ({sig.metrics[0]}; {sig.users})")
    results = [_signals_result(adapter, missing, optional, len(info.signals), target)]
    in_use = adapter.signals(families).deprecated
    exposed = [n for n in info.deprecated if _present(families, n) and n not in in_use]
    if in_use:
        results.append(
            warned(
                G,
                "deprecated metrics",
                f"signals read from deprecated names: {', '.join(in_use)}",
                f"upgrade {adapter.name}: the current names are gone from this version",
                target=target,
            )
        )
    if exposed:
        results.append(
            warned(
                G,
                "deprecated metrics",
                f"exposes deprecated names: {', '.join(exposed)}",
                info.deprecated_fix,
                target=target,
            )
        )
    elif not in_use:
        results.append(passed(G, "deprecated metrics", "no deprecated metric names", target=target))
    return results


def _signals_result(
    adapter: EngineAdapter, missing: list[str], optional: list[str], total: int, target: str
) -> CheckResult:
    if missing:
        return failed(
            G,
            "metrics",
            f"missing: {'; '.join(missing + optional)}",
            f"run a supported {adapter.name} version; {adapter.metrics_hint}",
            target=target,
        )
    if optional:
        return warned(
            G,
            "metrics",
            f"missing: {'; '.join(optional)}",
            f"run a current {adapter.name} version",
            target=target,
        )
    return passed(G, "metrics", f"all {total} signals router and autoscaler read are present", target=target)


def evaluate_prefix_caching(
    adapter: EngineAdapter, enabled: bool | None, *, expected: bool = True, source: str = "", target: str = ""
) -> CheckResult:
    """Prefix caching matches what the profile asks for (on, unless it says otherwise)."""
    if enabled is None:
        return skipped(G, "prefix caching", f"{adapter.name} does not report it{source}", target=target)
    word = "on" if enabled else "off"
    if enabled == expected:
        return passed(G, "prefix caching", f"{word}{source}", target=target)
    if enabled:
        return warned(
            G,
            "prefix caching",
            f"on{source}, but the profile turns it off",
            "set enable_prefix_caching: true in the model profile",
            target=target,
        )
    return failed(
        G,
        "prefix caching",
        f"off{source}: cache-aware routing gains nothing and repeated prompts recompute",
        adapter.diagnostics.prefix_caching_fix,
        target=target,
    )


def server_info_flags(adapter: EngineAdapter, body: object) -> tuple[bool | None, bool | None]:
    """(prefix caching on, /metrics on) from a server-info body; None where it says nothing."""
    info = adapter.diagnostics
    if not isinstance(body, Mapping):
        return None, None
    off = body.get(info.prefix_off_key) if info.prefix_off_key else None
    on = body.get(info.metrics_on_key) if info.metrics_on_key else None
    return (None if not isinstance(off, bool) else not off), (on if isinstance(on, bool) else None)


def evaluate_completion(
    status: int | None, body: object, elapsed_s: float, *, error: str | None = None, target: str = ""
) -> CheckResult:
    """A one-token completion came back with a choice."""
    if status is None:
        return failed(
            G, "completion", f"POST /v1/completions: {error or 'no answer'}", _UNREACHABLE_FIX, target=target
        )
    if status != 200:
        message = body.get("error", body) if isinstance(body, dict) else body
        return failed(
            G,
            "completion",
            f"POST /v1/completions: HTTP {status}: {str(message)[:120]}",
            "read the engine's log; the request was 1 token of 'ping'",
            target=target,
        )
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices:
        return failed(
            G,
            "completion",
            f"POST /v1/completions answered without choices: {str(body)[:80]}",
            "is this an OpenAI-compatible server?",
            target=target,
        )
    return passed(
        G, "completion", f"answered a 1-token completion in {elapsed_s * 1000:.0f} ms", target=target
    )


def evaluate_side_channel(body: object, *, target: str) -> CheckResult:
    """A sequential-style PD prefill (vLLM NIXL) answered its prefill leg naming a KV side channel
    (``kv_transfer_params.remote_host``/``remote_port``) its decodes can reach: a loopback address on an
    engine reached at another address sends every remote decode's handshake to the decode itself."""
    name = "kv side channel"
    params = body.get("kv_transfer_params") if isinstance(body, dict) else None
    host = params.get("remote_host") if isinstance(params, dict) else None
    if not isinstance(host, str) or not host:
        return skipped(G, name, "the prefill leg's answer names no remote_host", target=target)
    where = f"{host}:{params.get('remote_port')}" if isinstance(params, dict) else host
    engine_host = urlsplit(target).hostname or ""
    if is_loopback(host, unspecified=True) and not is_loopback(engine_host, unspecified=True):
        return failed(
            G, name, f"the prefill names its KV side channel at {where}: a decode on another host would "
            "handshake with itself",
            "set VLLM_NIXL_SIDE_CHANNEL_HOST to the engine's own address (infctl render sets it from the "
            "pod's status.podIP; re-render and re-apply)", target=target,
        )  # fmt: skip
    return passed(G, name, f"the prefill names its KV side channel at {where}", target=target)
