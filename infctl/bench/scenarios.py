"""The seed's comparisons as runnable scenarios: the same workload through the same stack, two ways.

A :class:`Scenario` holds a workload, a load plan and two :class:`Arm` (a router policy and, for length
bucketing, which engines form which pool). :func:`run_scenario` empties the engines' prefix caches (as each
engine allows: :mod:`infctl.bench.cache_reset`), sets each arm on a running router through its admin API,
benchmarks, and returns both results; :func:`scenario_rows` turns them into the measures the seed reported,
with its figures beside ours.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from infctl.bench.cache_reset import reset_prefix_caches
from infctl.bench.config import BenchConfig, LoadPlan, Stage
from infctl.bench.metrics import summarize
from infctl.bench.result import BenchResult
from infctl.bench.run import run_benchmark
from infctl.bench.server_view import detect_adapters
from infctl.bench.stats import Distribution
from infctl.bench.workloads import LengthDist, MixComponent, MixtureSpec, SharedPrefixSpec
from infctl.bench.workloads.specs import WorkloadSpec
from infctl.engines import EngineAdapter
from infctl.errors import ConfigError, EngineError

SHORT_MAX_TOKENS = 2048
"""Prompts up to this many tokens are "short" in the bucketing scenario (router buckets and the report)."""
SHORT_MEAN, LONG_MEAN = 600, 16_000
"""The bucketing mix's mean chat and document prompt, tokens (documents: the public Mooncake trace's mean
prompt is 15.3k)."""


@dataclass(frozen=True)
class Arm:
    label: str
    policy: str | Mapping[str, Any]
    pools: Sequence[str | None] = ()
    """Pool of each engine, in engine order; empty: no pools."""


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: WorkloadSpec
    load: LoadPlan
    baseline: Arm
    infctl: Arm
    seed_says: Mapping[str, str] = field(default_factory=dict)
    """Measure -> what the published system reported for it."""


def prefix_scenario(num_engines: int, *, requests: int = 240, rate: float = 16.0) -> Scenario:
    """Shared prefixes whose working set is larger than one engine's KV cache but fits in all of them."""
    return Scenario(
        name="prefix-aware routing (shared prefixes)",
        workload=SharedPrefixSpec(
            groups=12 * num_engines,
            prefix_tokens=2048,
            zipf=0.6,
            input=LengthDist(mean=64),
            output=LengthDist(mean=32),
        ),
        load=LoadPlan(stages=[Stage(rate=rate, num_requests=requests)]),
        baseline=Arm("round robin", "round_robin"),
        infctl=Arm("infctl cache_aware", "cache_aware"),
        seed_says={"prefix-cache hit rate": "60% -> 90%", "TTFT p50": "-29%"},
    )


def bucketing_mix(
    short_output: int = 32, long_output: int = 16, *, context: int | None = None
) -> MixtureSpec:
    """The seed's mixed traffic, one definition for the live benchmarks and the simulator's comparison: 90%
    chats (lognormal around :data:`SHORT_MEAN`, up to :data:`SHORT_MAX_TOKENS`), 10% documents (uniform over
    half to one and a half :data:`LONG_MEAN`). Outputs are mean lengths: short ones keep a live run's
    streaming (the host's share) small; the simulator's throughput stage asks for longer ones.

    ``context``: the engines' ``max_model_len``; documents are cut to fit it with their output, as
    ``--max-input-tokens`` would (an engine refuses a longer request)."""
    short = LengthDist(kind="lognormal", mean=SHORT_MEAN, sigma=0.5, max=SHORT_MAX_TOKENS)
    longest = None if context is None else context - long_output
    if longest is not None and longest <= SHORT_MAX_TOKENS:
        raise ConfigError(
            f"a context of {context} tokens leaves no room for a document longer than a short prompt "
            f"({SHORT_MAX_TOKENS} tokens)",
            hint=f"give the engines max_model_len {SHORT_MAX_TOKENS + long_output + 1} or more",
        )
    long_ = LengthDist(kind="uniform", low=LONG_MEAN // 2, high=LONG_MEAN * 3 // 2, max=longest)
    return MixtureSpec(
        components=[
            MixComponent(name="short", weight=0.9, input=short, output=LengthDist(mean=short_output)),
            MixComponent(name="long", weight=0.1, input=long_, output=LengthDist(mean=long_output)),
        ]
    )


def bucketing_scenario(
    num_engines: int,
    *,
    requests: int = 240,
    rate: float = 16.0,
    buckets: Sequence[Mapping[str, Any]] | None = None,
    context: int | None = None,
) -> Scenario:
    """90% short chats, 10% long documents (:func:`bucketing_mix`, cut to ``context``); with buckets the
    long ones get their own engines.

    ``buckets``: a deployment's own (its length pools), its engines already labelled with their pools
    (``run_scenario``'s ``pools``); None: half of the engines form the long pool, as in the shipped local
    profile (the documents bring ~75% of the prompt tokens; with a quarter they queue on it)."""
    pools: list[str] = []
    if buckets is None:
        long_engines = max(1, num_engines // 2)
        pools = ["short"] * (num_engines - long_engines) + ["long"] * long_engines
        buckets = [
            {"name": "short", "max_tokens": SHORT_MAX_TOKENS, "pools": ["short"]},
            {"name": "long", "pools": ["long"]},
        ]
    return Scenario(
        name="long/short bucketing (mixed lengths)",
        workload=bucketing_mix(context=context),
        load=LoadPlan(stages=[Stage(rate=rate, num_requests=requests)]),
        baseline=Arm("one pool", "least_load"),
        infctl=Arm("infctl buckets", {"preset": "least_load", "buckets": list(buckets)}, pools),
        seed_says={"short TTFT p99": "-91%"},
    )


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    baseline: BenchResult
    infctl: BenchResult


Progress = Callable[[str], None]


async def run_scenario(
    scenario: Scenario,
    *,
    router_url: str,
    engine_urls: Sequence[str],
    model: str,
    seed: int = 1,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    admin_token: str | None = None,
    pools: Sequence[str | None] = (),
    after_arm: Callable[[Arm, BenchResult], Awaitable[None]] | None = None,
    engine: str | None = None,
) -> ScenarioResult:
    """Both arms on the running router (set through its admin API, with ``admin_token`` when it requires
    one), one benchmark each, each on empty prefix caches. ``pools``: each engine's own pool label (a
    deployment's length pools), kept by arms that name none. ``after_arm`` is awaited as each arm's
    benchmark ends, before the next arm is set (e.g. to read the engines' own counters for that arm alone).
    ``engine``: the engines' kind (an ``infctl.engines`` name); None: detected from their /metrics.

    An engine that cannot reset its prefix cache (vLLM without ``VLLM_SERVER_DEV_MODE=1``) fails the run
    with the fix before the first arm sends a request."""
    say = progress or (lambda _: None)
    results: list[BenchResult] = []
    auth = {"authorization": f"Bearer {admin_token}"} if admin_token else {}
    async with httpx.AsyncClient(timeout=10.0, transport=transport, trust_env=False) as client:
        adapters = await detect_adapters(client, list(engine_urls), engine)
        for arm in (scenario.baseline, scenario.infctl):
            say(f"{scenario.name}: {arm.label}")
            await _set_arm(client, router_url, adapters, arm, pools, auth)
            cfg = BenchConfig(
                url=router_url,
                model=model,
                workload=scenario.workload,
                load=scenario.load,
                seed=seed,
                engine_urls=list(engine_urls),
                engine=engine,
                label=arm.label,
            )
            results.append(await run_benchmark(cfg))
            if after_arm is not None:
                await after_arm(arm, results[-1])
    return ScenarioResult(scenario, results[0], results[1])


async def _set_arm(
    client: httpx.AsyncClient,
    router: str,
    engines: Mapping[str, EngineAdapter],
    arm: Arm,
    own: Sequence[str | None],
    auth: Mapping[str, str],
) -> None:
    """Same starting line for both arms: empty prefix caches, this arm's pools (else the engines' own)
    and policy. The router's admin token goes to the router only."""
    await reset_prefix_caches(client, engines)
    labels = arm.pools or own
    for i, url in enumerate(engines):
        pool = labels[i] if i < len(labels) else None
        # PUT: the router already has these engines from the previous arm; a POST would be a 409.
        body = {"url": url, "pool": pool}
        await _ok(client.put(f"{router}/admin/backends/{url}", json=body, headers=auth), router)
    await _ok(client.put(f"{router}/admin/policy", json=arm.policy, headers=auth), router)


async def _ok(request: Any, where: str) -> None:
    resp: httpx.Response = await request
    if resp.status_code >= 400:
        raise EngineError(f"{where} refused the demo's setup call: {resp.status_code} {resp.text[:200]}")


def scenario_rows(res: ScenarioResult) -> list[tuple[str, str, str, str, str]]:
    """(measure, baseline, infctl, change, seed reported): the comparison table's rows."""
    a, b = res.baseline, res.infctl
    rows: list[tuple[str, str, str, str, str]] = []

    def row(name: str, x: float | None, y: float | None, fmt: Callable[[float], str]) -> None:
        change = f"{(y - x) / x * 100:+.0f}%" if x and y is not None else "n/a"
        rows.append((name, _or_na(x, fmt), _or_na(y, fmt), change, res.scenario.seed_says.get(name, "")))

    ms, pct = (lambda v: f"{v * 1e3:.0f} ms"), (lambda v: f"{v * 100:.0f}%")
    if isinstance(res.scenario.workload, SharedPrefixSpec):
        row("prefix-cache hit rate", _hit(a), _hit(b), pct)
        row("TTFT p50", a.summary.ttft["p50"], b.summary.ttft["p50"], ms)
        row("TTFT p99", a.summary.ttft["p99"], b.summary.ttft["p99"], ms)
    else:
        sa, sb = _short(a), _short(b)
        row("short TTFT p50", sa["p50"], sb["p50"], ms)
        row("short TTFT p99", sa["p99"], sb["p99"], ms)
        row("TTFT p99 (all)", a.summary.ttft["p99"], b.summary.ttft["p99"], ms)
    # Both arms get the same open-loop arrivals below saturation, so this equals the offered load; the seed's
    # throughput gains (+30%, +124%) need a saturating run, which these scenarios do not make.
    tok_s = a.summary.output_throughput, b.summary.output_throughput
    row("output tok/s (offered)", *tok_s, lambda v: f"{v:.0f}")
    row("failed requests", float(a.summary.failed), float(b.summary.failed), lambda v: f"{v:.0f}")
    return rows


def _hit(r: BenchResult) -> float | None:
    return r.server.hit_rate if r.server else None


def _short(r: BenchResult) -> Distribution:
    short = [rec for rec in r.requests if rec.input_tokens <= SHORT_MAX_TOKENS]
    return summarize(short).ttft


def _or_na(v: float | None, fmt: Callable[[float], str]) -> str:
    return "n/a" if v is None else fmt(v)
