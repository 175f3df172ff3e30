"""``run_benchmark``: the async core behind ``infctl bench`` (and the demo), and its sync wrapper ``run``."""

from __future__ import annotations

import asyncio
import contextlib
import platform
import signal
import socket
import sys
from datetime import UTC, datetime

import aiohttp
import httpx

import infctl
from infctl.bench.client import Target, make_session, perf_clock, resolve_model
from infctl.bench.config import BenchConfig
from infctl.bench.health import achieved_rate, client_health
from infctl.bench.load import LoadGenerator, ProgressFn
from infctl.bench.metrics import summarize
from infctl.bench.result import BenchResult, RunMetadata, StageResult
from infctl.bench.server_view import ServerView, ServerWatcher, detect_adapters
from infctl.bench.workloads import RandomSpec, RandomWorkload, build_workload, make_prompts, prefetched
from infctl.bench.workloads.lengths import LengthDist
from infctl.telemetry import make_client
from infctl.tokenization import load_tokenizer

WARMUP_SPEC = RandomSpec(input=LengthDist(mean=64), output=LengthDist(mean=8))
"""Warm-up requests are short and unrelated to the workload, so they warm connections, not caches."""


async def run_benchmark(
    cfg: BenchConfig,
    *,
    progress: ProgressFn | None = None,
    stop: asyncio.Event | None = None,
    connector: aiohttp.BaseConnector | None = None,
    scrape_transport: httpx.AsyncBaseTransport | None = None,
) -> BenchResult:
    """Run ``cfg`` and measure it. Setting ``stop`` ends the run early with the results so far.

    Files are read and validated and engines scraped before the first request, so a bad trace line or an
    unreachable engine raises (``ConfigError``, ``EngineError``, ``MetricsError``) without sending any load.
    """
    tokenizer = load_tokenizer(cfg.tokenizer) if cfg.tokenizer else None
    prompts = make_prompts(tokenizer, cfg.text)
    workload = build_workload(cfg.workload, cfg.api, cfg.seed, prompts)
    stop = stop or asyncio.Event()
    started = datetime.now(UTC)
    async with make_session(connector=connector) as session:
        model = cfg.model or await resolve_model(session, cfg.url)
        target = Target(
            url=cfg.url.rstrip("/") + cfg.request_path, api=cfg.api, model=model, headers=cfg.headers,
            extra_body=cfg.extra_body, timeout_s=cfg.timeout_s,
        )  # fmt: skip
        watcher = await _watcher(cfg, scrape_transport)
        gen = LoadGenerator(session, target, cfg.load, clock=perf_clock(), seed=cfg.seed, stop=stop)
        if cfg.load.warmup:
            warm = RandomWorkload(WARMUP_SPEC, cfg.api, cfg.seed + 1).requests()
            await gen.warmup(warm, cfg.load.warmup)
        reporter = asyncio.create_task(_report(gen, progress, cfg.progress_interval_s)) if progress else None
        server: ServerView | None = None
        specs = workload.requests()
        if tokenizer is not None and tokenizer.exact:
            specs = prefetched(specs)  # fitting prompts to a real tokenizer costs ms: off the send loop
        try:
            if watcher is not None:
                await watcher.start()
            records = await gen.run(specs)
        finally:
            close = getattr(specs, "close", None)
            if close is not None:
                close()  # ends the prefetching thread
            if reporter is not None:
                reporter.cancel()
            if watcher is not None:
                server = await watcher.finish() if not stop.is_set() or gen.records else None
                await watcher.close()
        if progress is not None:
            progress(gen.progress())
    summary = summarize(records, cfg.slo)
    stages = [
        StageResult(i, s.label, s.mean_rate, achieved_rate([r for r in records if r.stage == i]),
                    summarize([r for r in records if r.stage == i], cfg.slo))
        for i, s in enumerate(cfg.load.stages)
    ]  # fmt: skip
    health = client_health(records, cfg.load, gen.stats)
    warnings = list(health.warnings)
    if gen.interrupted:
        warnings.append(f"interrupted: results cover the {len(records)} requests that finished")
    if gen.exhausted and cfg.workload.kind not in ("trace", "sharegpt"):
        warnings.append(f"the workload ran out after {len(records)} requests")
    if server is not None:
        warnings += [f"{e.url}: {e.error}" for e in server.engines if e.error]
    meta = RunMetadata(
        label=cfg.label or f"{cfg.workload.kind} @ {cfg.load.stages[0].label}",
        started_at=started.isoformat(timespec="seconds"),
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        infctl_version=infctl.__version__, model=model, url=cfg.url, host=socket.gethostname(),
        python=f"{platform.python_implementation()} {sys.version.split()[0]}",
        interrupted=gen.interrupted, workload_exhausted=gen.exhausted,
    )  # fmt: skip
    return BenchResult(cfg, meta, summary, stages, health, server, records, warnings)


async def _watcher(cfg: BenchConfig, transport: httpx.AsyncBaseTransport | None) -> ServerWatcher | None:
    if not cfg.engine_urls:
        return None
    async with make_client(transport) as client:
        adapters = await detect_adapters(client, cfg.engine_urls, cfg.engine)
    return ServerWatcher(adapters, interval_s=cfg.sample_interval_s, transport=transport)


async def _report(gen: LoadGenerator, progress: ProgressFn, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        progress(gen.progress())


def run(cfg: BenchConfig, *, progress: ProgressFn | None = None) -> BenchResult:
    """Run ``cfg`` to completion in a new event loop; Ctrl-C stops it and returns the partial result."""

    async def main() -> BenchResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
        try:
            return await run_benchmark(cfg, progress=progress, stop=stop)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)

    return asyncio.run(main())
