"""``infctl demo``: start the local demo stack, show it working, run the seed's comparisons, tear it down.

First two chat requests (the second repeats the first one's system prompt, so its ``cached_tokens`` shows the
prefix cache at work); then, unless ``quick``, the scenarios of :mod:`infctl.bench.scenarios` side by side on
the same engines and router: round robin vs cache-aware routing, one pool vs long/short buckets.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

import infctl
from infctl.bench.report import comparison_html
from infctl.bench.scenarios import bucketing_scenario, prefix_scenario, run_scenario, scenario_rows
from infctl.config import DeploymentProfile
from infctl.engines import get_adapter
from infctl.errors import EngineError, InfctlError, LocalTargetError
from infctl.local.admin_token import ensure_token, token_path
from infctl.local.control import delete
from infctl.local.deploy import prepare
from infctl.local.http import async_client
from infctl.local.paths import resolve_run_dir
from infctl.local.plan import build_plan, profile_router_port
from infctl.local.procs import port_is_free
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan
from infctl.local.state import RunState
from infctl.local.supervisor import serve

DEMO_PROFILE = Path("profiles/local-length-pools.yaml")
BUCKETING_REQUESTS = 480
"""Requests per arm of the bucketing comparison (the prefix one sends the scenario's default 240)."""

SYSTEM_PROMPT = (
    "You are the operations assistant of an inference platform. You answer in short plain sentences, you "
    "never invent numbers, and when a question is about latency you first name the metric you mean: time to "
    "first token, time per output token, or end to end latency. Prefill and decode may run on separate "
    "engines; the router sends each request to the engine most likely to hold its prompt prefix in cache."
)
QUESTIONS = ("What does the router optimise for?", "Why does a repeated prompt prefix start faster?")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ChatResult:
    """One streamed chat completion, measured on the client."""

    reply: str
    ttft_s: float
    """Seconds from sending the request to the first chunk with content."""
    total_s: float
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    """``usage.prompt_tokens_details.cached_tokens``: prompt tokens served from the prefix cache."""


@dataclass(frozen=True)
class ScenarioRows:
    name: str
    baseline: str
    infctl: str
    rows: list[tuple[str, str, str, str, str]]
    """(measure, baseline, infctl, change, seed reported)."""


@dataclass(frozen=True)
class DemoResult:
    release: str
    url: str
    """Where the requests went: the router when the plan has one, else the first engine."""
    model: str
    processes: int
    startup_s: float
    first: ChatResult
    repeated_prefix: ChatResult
    scenarios: list[ScenarioRows] = field(default_factory=list)
    report: str | None = None
    """Path of the HTML report of the scenarios, when they ran."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_demo_profile(path: Path | None = None) -> Path:
    """``path``, else ``profiles/local-length-pools.yaml`` from the working directory or the source
    checkout."""
    if path is not None:
        return path
    package = Path(infctl.__file__).resolve().parent
    candidates = [DEMO_PROFILE, package.parent / DEMO_PROFILE, package / "_profiles" / DEMO_PROFILE.name]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise LocalTargetError(
            f"the demo profile {DEMO_PROFILE} was not found here nor in the infctl checkout",
            hint="run from the repository root, or pass one: infctl demo -f PROFILE",
        )
    return found


def with_cache_resets(profile: DeploymentProfile) -> DeploymentProfile:
    """``profile`` with its engines started so that their prefix caches can be reset between the arms of a
    comparison (:mod:`infctl.bench.cache_reset`): what the engine's reset needs in its environment (vLLM:
    ``VLLM_SERVER_DEV_MODE=1``) added to ``model.env``, for real and simulated engines alike.

    Only for engines started to be benchmarked and stopped after: vLLM's dev mode also opens endpoints
    that are not for production (sleep, collective RPC), so ``infctl deploy`` and the rendered manifests
    never set it on their own."""
    model = profile.model
    env = {**get_adapter(model.engine).cache_reset.env, **model.env}
    return profile.model_copy(update={"model": model.model_copy(update={"env": env})})


def demo_plan(
    profile: DeploymentProfile, run_dir: Path | None = None, *, is_free: Callable[[int], bool] = port_is_free
) -> LocalPlan:
    """The demo's plan: the profile's processes as release ``<name>-demo``, beside any deployed copy, its
    engines able to reset their prefix caches (:func:`with_cache_resets`). Its router listens on the
    profile's ``router.port``, or, when a deployed copy (or anything else) holds that port, on the next free
    one (the demo prints where)."""
    demo = with_cache_resets(profile).model_copy(update={"name": f"{profile.name}-demo"})
    directory = resolve_run_dir(run_dir, profile.local.run_dir)
    port = profile_router_port(demo)
    fixed = port is None or is_free(port)
    return build_plan(demo, is_free=is_free, run_dir=directory, fixed_router_port=fixed)


def run_demo(
    plan: LocalPlan,
    settings: SupervisorSettings | None = None,
    *,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    quick: bool = False,
    report: Path | None = None,
) -> DemoResult:
    """Run the demo (sync entry point, owns the event loop); Ctrl-C interrupts it and still tears down.

    ``quick`` skips the scenarios; ``report`` is where their HTML report goes (default: beside the release
    directory, ``<run_dir>/<release>-report.html``, which outlives the release that ``delete`` removes)."""
    settings = settings or SupervisorSettings(health_timeout=30.0, grace_period=5.0)
    prepare(plan, settings)
    target = None if quick else (report or plan.run_dir / f"{plan.release}-report.html")
    result = asyncio.run(_main(plan, settings, progress or (lambda _: None), transport, target))
    delete(plan.run_dir, plan.release)
    return result


async def _main(
    plan: LocalPlan,
    settings: SupervisorSettings,
    progress: Progress,
    transport: httpx.AsyncBaseTransport | None,
    report: Path | None,
) -> DemoResult:
    ready, stop = asyncio.Event(), asyncio.Event()
    supervisor = asyncio.create_task(
        serve(plan, settings, ready=ready, stop=stop, on_change=lambda s: progress(_starting(s)))
    )
    work = asyncio.create_task(_exercise(plan, ready, supervisor, progress, transport, report))
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, work.cancel)
    try:
        return await work
    except asyncio.CancelledError:
        raise InfctlError("demo interrupted; everything it started was stopped") from None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        progress("stopping")
        stop.set()
        await asyncio.gather(supervisor, return_exceptions=True)


def _starting(state: RunState) -> str:
    healthy = sum(p.status == "healthy" for p in state.processes)
    return f"{state.status}: {healthy}/{len(state.processes)} processes healthy"


async def _exercise(
    plan: LocalPlan,
    ready: asyncio.Event,
    supervisor: asyncio.Task[RunState],
    progress: Progress,
    transport: httpx.AsyncBaseTransport | None,
    report: Path | None,
) -> DemoResult:
    started = time.monotonic()
    waiter = asyncio.ensure_future(ready.wait())
    await asyncio.wait({waiter, supervisor}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if not ready.is_set():
        supervisor.result()  # raises why it could not start
        raise LocalTargetError("the supervisor stopped before the demo stack was healthy")
    startup = time.monotonic() - started
    url = plan.entrypoint.url
    async with async_client(timeout=30.0, transport=transport) as client:
        results = []
        for question in QUESTIONS:
            progress(f"asking {url}: {question}")
            results.append(await stream_chat(client, url, plan.model, question))
    scenarios: list[ScenarioRows] = []
    if report is not None:
        scenarios = await _scenarios(plan, progress, transport, report)
    return DemoResult(
        release=plan.release,
        url=url,
        model=plan.model,
        processes=len(plan.specs),
        startup_s=startup,
        first=results[0],
        repeated_prefix=results[1],
        scenarios=scenarios,
        report=None if report is None else str(report),
    )


async def _scenarios(
    plan: LocalPlan, progress: Progress, transport: httpx.AsyncBaseTransport | None, report: Path
) -> list[ScenarioRows]:
    """Both comparisons on the running stack, then one HTML page with their tables and plots."""
    specs = [s for s in plan.specs if s.kind == "engine"]
    engines = [s.url for s in specs]
    if plan.entrypoint.kind != "router":
        raise LocalTargetError("the demo's comparisons need the router", hint="set router.enabled: true")
    # The supervisor gave the router the release's admin token (the file exists once it runs).
    token = ensure_token(token_path(plan))
    done = []
    # The profile's length pools are the bucketing arm's pools (their engines labelled by the plan);
    # a profile without them gets half of its engines as the long pool.
    buckets = plan.buckets or None
    # Bucketing's headline is a p99 over the short requests: at 240 requests it was their 2nd-worst, and
    # the seed alone moved it by 10 points (virtual clock); 480 halves that for 15 s more.
    bucketing = bucketing_scenario(
        len(engines), requests=BUCKETING_REQUESTS, buckets=buckets, context=plan.max_model_len
    )
    for scenario in (prefix_scenario(len(engines)), bucketing):
        done.append(
            await run_scenario(
                scenario,
                router_url=plan.entrypoint.url,
                engine_urls=engines,
                model=plan.model,
                progress=progress,
                transport=transport,
                admin_token=token,
                pools=[s.pool for s in specs],
                engine=plan.engine,
            )
        )
    out = [
        ScenarioRows(r.scenario.name, r.scenario.baseline.label, r.scenario.infctl.label, scenario_rows(r))
        for r in done
    ]
    page = comparison_html(
        "infctl demo", [(o.name, o.rows, [r.baseline, r.infctl]) for o, r in zip(out, done, strict=True)]
    )
    await asyncio.to_thread(_write, report, page)
    return out


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def stream_chat(client: httpx.AsyncClient, url: str, model: str, question: str) -> ChatResult:
    """Send one streaming chat completion and measure it (TTFT: first chunk with non-empty content)."""
    body = {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
        "max_tokens": 24,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    parts: list[str] = []
    usage: dict[str, Any] = {}
    ttft: float | None = None
    sent = time.monotonic()
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as resp:
        if resp.status_code != 200:
            text = (await resp.aread()).decode(errors="replace")[:300]
            raise EngineError(f"{url}/v1/chat/completions answered {resp.status_code}: {text}")
        async for line in resp.aiter_lines():
            if not line.startswith("data:") or line.endswith("[DONE]"):
                continue
            chunk = json.loads(line[5:])
            for choice in chunk.get("choices") or ():
                content = (choice.get("delta") or {}).get("content")
                if content:
                    ttft = ttft if ttft is not None else time.monotonic() - sent
                    parts.append(content)
            usage = chunk.get("usage") or usage
    details = usage.get("prompt_tokens_details") or {}
    return ChatResult(
        reply="".join(parts).strip(),
        ttft_s=ttft if ttft is not None else float("nan"),
        total_s=time.monotonic() - sent,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        cached_tokens=int(details.get("cached_tokens") or 0),
    )
