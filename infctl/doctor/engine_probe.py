"""Probing one engine over HTTP (and ZMQ for KV events); verdicts come from ``engine_eval``."""

from __future__ import annotations

import asyncio

import httpx

from infctl.doctor import engine_eval as ev
from infctl.doctor.http import Answer, fetch
from infctl.doctor.kv_probe import check_kv_events, provoking_prompt, subscriber_endpoint
from infctl.doctor.result import CheckResult, failed, skipped, warned
from infctl.doctor.targets import EngineTarget
from infctl.engines import DEFAULT_ENGINE, ENGINES, EngineAdapter, get_adapter
from infctl.errors import MetricsError
from infctl.router.pd_legs import pd_endpoint
from infctl.router.ranks import backend_id, rank_endpoint
from infctl.telemetry import MetricFamilies, parse_metrics

LATER = ("models", "metrics", "prefix caching", "completion", "kv events")


async def check_engine(
    client: httpx.AsyncClient, target: EngineTarget, *, kv_wait_s: float = 3.0
) -> list[CheckResult]:
    """Every engine finding for ``target``: health first; nothing else when it cannot be reached."""
    url, t = target.url.rstrip("/"), target.url
    known = get_adapter(target.engine) if target.engine else None
    health = await fetch(client, "GET", url + (known or ENGINES[DEFAULT_ENGINE]).health.path)
    if health.status is None:
        adapter = known or ENGINES[DEFAULT_ENGINE]
        return [
            ev.evaluate_health(adapter, None, error=health.error, target=t),
            *(skipped("engines", name, "engine unreachable", target=t) for name in LATER),
        ]
    metrics = await fetch(client, "GET", url + (known or ENGINES[DEFAULT_ENGINE]).metrics_path)
    families, parse_error = _families(metrics)
    results: list[CheckResult] = []
    adapter = known or await _detect(client, url, families, results, t)
    deep = None
    if adapter.health.state(health.status) == "starting" and adapter.health.deep_path:
        deep = (await fetch(client, "GET", url + adapter.health.deep_path)).status
    results.insert(0, ev.evaluate_health(adapter, health.status, deep_status=deep, target=t))
    models = await fetch(client, "GET", url + "/v1/models")
    results.append(ev.evaluate_models(models.body, target.model, target=t))
    info = await _server_info(client, url, adapter)
    prefix_on, metrics_on = ev.server_info_flags(adapter, info)
    results += _metrics_results(adapter, metrics, families, parse_error, metrics_on, t)
    results.append(_prefix_caching(adapter, families, prefix_on, target))
    served = _models(models.body)
    model = target.model if target.model in served else (served[0] if served else target.model)
    completion, kv = await asyncio.gather(
        _completion(client, url, adapter, target, model),
        _kv_events(client, url, adapter, target, model, kv_wait_s),
    )
    return [*results, *completion, *kv]


def _families(metrics: Answer) -> tuple[MetricFamilies, str | None]:
    if metrics.status != 200:
        return {}, None
    try:
        return parse_metrics(metrics.text), None
    except MetricsError as exc:
        return {}, exc.message


async def _detect(
    client: httpx.AsyncClient, url: str, families: MetricFamilies, results: list[CheckResult], target: str
) -> EngineAdapter:
    """The engine by its metric names, else by which load endpoint answers; else the default, said so."""
    name = ev.detect_engine(families)
    if name is None:
        for candidate, adapter in ENGINES.items():
            if adapter.load_paths and (await fetch(client, "GET", url + adapter.load_paths[0])).status == 200:
                name = candidate
                break
    if name is None:
        summary = f"cannot tell the engine; checking as {DEFAULT_ENGINE}"
        results.append(
            warned("engines", "engine kind", summary, "name it: --engine-url URL,engine=NAME", target=target)
        )
    return get_adapter(name or DEFAULT_ENGINE)


async def _server_info(client: httpx.AsyncClient, url: str, adapter: EngineAdapter) -> object:
    for path in adapter.diagnostics.server_info_paths:
        answer = await fetch(client, "GET", url + path)
        if answer.status == 200:
            return answer.body
    return None


def _metrics_results(
    adapter: EngineAdapter,
    metrics: Answer,
    families: MetricFamilies,
    parse_error: str | None,
    metrics_on: bool | None,
    target: str,
) -> list[CheckResult]:
    if metrics.status == 200 and parse_error is None:
        return ev.evaluate_metrics(families, adapter, metrics_on=metrics_on, target=target)
    found = metrics.error if metrics.status is None else (parse_error or f"HTTP {metrics.status}")
    fix = adapter.diagnostics.metrics_flag_fix if metrics_on is not True else None
    return [
        failed(
            "engines",
            "metrics",
            f"GET {adapter.metrics_path}: {found}: router and autoscaler are blind to this engine",
            fix or adapter.metrics_hint,
            target=target,
        )
    ]


def _prefix_caching(
    adapter: EngineAdapter, families: MetricFamilies, from_info: bool | None, target: EngineTarget
) -> CheckResult:
    from_metrics = adapter.signals(families).prefix_caching if families else None
    flag = from_metrics if from_metrics is not None else from_info
    if from_metrics is not None:
        source = " (cache config in /metrics)"
    else:
        source = f" ({adapter.diagnostics.server_info_paths[0]})" if from_info is not None else ""
    return ev.evaluate_prefix_caching(
        adapter, flag, expected=target.prefix_caching, source=source, target=target.url
    )


def _models(body: object) -> list[str]:
    data = body.get("data") if isinstance(body, dict) else None
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m] if isinstance(data, list) else []


def _pairs_only(adapter: EngineAdapter, target: EngineTarget) -> bool:
    """A parallel-style PD engine (SGLang prefill or decode) answers only requests carrying a rendezvous."""
    return target.role != "both" and adapter.pd_style == "parallel"


async def _completion(
    client: httpx.AsyncClient, url: str, adapter: EngineAdapter, target: EngineTarget, model: str | None
) -> list[CheckResult]:
    """A one-token completion; a sequential-style PD prefill (vLLM) gets it as the router's prefill leg,
    and the KV side channel its answer names is checked too."""
    if _pairs_only(adapter, target):
        return [
            skipped(
                "engines",
                "completion",
                f"a {target.role} engine answers paired requests only",
                target=target.url,
            )
        ]
    body = {"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0}
    prefill_leg = target.role == "prefill" and adapter.pd_style == "sequential"
    if prefill_leg:
        body = adapter.prefill_body(body, pd_endpoint(url))
    answer = await fetch(client, "POST", url + "/v1/completions", body)
    found = [
        ev.evaluate_completion(
            answer.status, answer.body, answer.elapsed_s, error=answer.error, target=target.url
        )
    ]
    if prefill_leg and answer.status == 200:
        found.append(ev.evaluate_side_channel(answer.body, target=target.url))
    return found


async def _kv_events(
    client: httpx.AsyncClient,
    url: str,
    adapter: EngineAdapter,
    target: EngineTarget,
    model: str | None,
    wait_s: float,
) -> list[CheckResult]:
    """One check per data-parallel rank: each rank publishes on its own port (base + rank), and only a
    request pinned to the rank makes it publish."""
    if target.kv_events is None:
        if target.precise:
            return [
                failed(
                    "engines",
                    "kv events",
                    "the router's precise index needs KV events, and this engine publishes none",
                    "add kv_events: {port: 5557} to the model profile",
                    target=target.url,
                )
            ]
        return [skipped("engines", "kv events", "no KV-event endpoint configured", target=target.url)]
    base = subscriber_endpoint(target.kv_events, target.url)
    if target.data_parallel_size <= 1:
        return [await _kv_rank(client, url, adapter, target, model, wait_s, base, None)]
    return list(
        await asyncio.gather(
            *(
                _kv_rank(client, url, adapter, target, model, wait_s, rank_endpoint(base, r), r)
                for r in range(target.data_parallel_size)
            )
        )
    )


async def _kv_rank(
    client: httpx.AsyncClient,
    url: str,
    adapter: EngineAdapter,
    target: EngineTarget,
    model: str | None,
    wait_s: float,
    endpoint: str,
    rank: int | None,
) -> CheckResult:
    pin = adapter.pin_rank(rank) if rank is not None else None
    body = {"model": model, "prompt": provoking_prompt(), "max_tokens": 1, **(pin.body if pin else {})}
    headers = dict(pin.headers) if pin else None
    provoke = (
        None
        if _pairs_only(adapter, target)
        else (lambda: fetch(client, "POST", url + "/v1/completions", body, headers=headers))
    )
    where = target.url if rank is None else backend_id(target.url, rank)
    return await check_kv_events(endpoint, provoke, wait_s=wait_s, target=where)
