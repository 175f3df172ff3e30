"""The router daemon: start-up (fronts, background rounds, discovery) and graceful drain.

Its state is ``infctl.router.state``; the aiohttp application, ``infctl.router.app``; the background rounds,
``infctl.router.background``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from aiohttp import web

from infctl.errors import ConfigError
from infctl.router.admin_validate import check_exposure
from infctl.router.app import build_app
from infctl.router.background import probe_loop, scrape_loop
from infctl.router.config import RouterConfig
from infctl.router.core import RouterCore
from infctl.router.discovery import discover
from infctl.router.fetch import EngineGet, SessionGet
from infctl.router.front import LeanListener
from infctl.router.http1 import Http1Pool, Http1Settings
from infctl.router.policies import PDSettings, build_policy
from infctl.router.pool import BackendPool
from infctl.router.splice import Splicer
from infctl.router.state import RouterState as RouterState  # where handlers long imported it from
from infctl.router.upstream import make_session
from infctl.telemetry.scrape import Getter
from infctl.tokenization import load_tokenizer

if TYPE_CHECKING:
    from infctl.kube.client import KubeClient


log = logging.getLogger(__name__)
_INEXACT = {
    "estimate": "no model tokenizer is named (--tokenizer), so counts are estimates by bytes and characters "
    "and the precise index cannot match the engines' KV events",
    "words": "the simulator's convention (whitespace words); right for infctl sim backends only",
}

UpstreamClient = Literal["lean", "aiohttp"]
ServerKind = Literal["lean", "aiohttp"]
HANDOVER_IDLE_S = 1.0
"""Handing over: a keep-alive connection idle this long is closed (seconds); a busier one is closed after
its next answer instead."""
_DRAIN_GRACE_S = 0.25
"""Of ``drain_timeout_s``, what is kept for closing connections once in-flight streams are done or cut."""


def build_state(
    cfg: RouterConfig,
    *,
    scraper: Getter | None = None,
    upstream_client: UpstreamClient = "lean",
) -> RouterState:
    """``upstream_client``: ``lean`` sends generation requests, PD prefill legs, mirrored copies, scrapes and
    probes through ``infctl.router.http1`` (aiohttp's client remains for clients that are not HTTP/1.1 and
    for HTTPS engines); ``aiohttp`` uses aiohttp's client for everything
    (``bench_router_overhead.py --upstream-clients lean,aiohttp`` compares them). ``scraper``, when
    given, carries the scrapes and probes instead (a benchmark's old path, a test's fake)."""
    policy = build_policy(cfg.policy)
    pool = BackendPool(cfg.backends, cfg.health, engine=cfg.engine)
    tokenizer = load_tokenizer(cfg.tokenizer, engines=pool.serving_urls)  # `engine`: the backends' own
    if not tokenizer.exact:
        log.warning(
            "prompt tokens are counted by %s: %s", tokenizer.name, _INEXACT.get(tokenizer.name, "not exact")
        )
    http1 = None
    if upstream_client == "lean":
        http1 = Http1Pool(
            Http1Settings(connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s)
        )
    timeout_s = max(cfg.scrape_interval_s * 5, 1.0)
    session = make_session(connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s)
    return RouterState(
        tokenizer=tokenizer,
        http1=http1,
        cfg=cfg,
        core=RouterCore(policy, block_size=cfg.block_size),
        pool=pool,
        session=session,
        # Scrapes and probes on the bare lean path: half the CPU of httpx's client over the same pool.
        scraper=EngineGet(
            http1 if scraper is None else None, scraper or SessionGet(session, timeout_s), timeout_s
        ),
        policy_name=cfg.policy if isinstance(cfg.policy, str) else policy.name,
        pd_settings=PDSettings(
            mode=cfg.pd_mode,
            min_uncached_tokens=cfg.pd_min_uncached_tokens,
            cross_group_cost=cfg.pd_cross_group_cost,
        ),
    )


async def serve(
    cfg: RouterConfig,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    scraper: Getter | None = None,
    on_ready: Callable[[str], None] | None = None,
    kube_connect: Callable[[], KubeClient] | None = None,
    upstream_client: UpstreamClient = "lean",
    server: ServerKind | None = None,
) -> None:
    """Run the router until ``stop`` is set (or SIGINT/SIGTERM), then drain: keep accepting, answer /ready
    and new generation requests 503 while in-flight ones finish, exit within ``drain_timeout_s``.

    ``server``: ``lean`` parses HTTP/1.1 generation POSTs itself (``infctl.router.front``) and splices every
    other request's connection to the aiohttp app (``infctl.router.splice``); ``aiohttp`` serves everything
    with aiohttp, and then sends everything through aiohttp's client whatever ``upstream_client`` says (its
    server takes an answer through its own response API only, which the lean relay does not write to).
    ``server`` None: ``cfg.server`` (router.yaml's ``server:``). ``on_ready`` receives the base URL once
    listening (useful with ``port=0``)."""
    check_exposure(cfg.host, cfg.admin_token, insecure=cfg.insecure_admin)
    server = server or cfg.server
    if server == "aiohttp":
        upstream_client = "aiohttp"  # one client per stack: aiohttp's front relays through aiohttp's client
    stop = stop or asyncio.Event()
    state = build_state(cfg, scraper=scraper, upstream_client=upstream_client)
    # handler_cancellation: a client that disconnects cancels its handler, which drops the upstream request.
    # The drain itself is ours (_drain); what aiohttp's shutdown waits for after it is the short grace.
    grace = min(_DRAIN_GRACE_S, cfg.drain_timeout_s / 4)
    # keepalive_timeout: aiohttp has no deadline for a request head of its own; this one closes a connection
    # whose next head has not arrived header_timeout_s after its last answer (or its start), so a client
    # trickling a head holds it no longer, on the aiohttp front and on connections the lean one hands over.
    # Not keepalive_timeout_s (75 s, the lean front's idle limit): that would let a trickled head hold an
    # aiohttp connection 75 s. Handed-over connections carry admin, /metrics and probe GETs, which clients
    # retry on a closed idle connection; ``--server aiohttp`` users raise header_timeout_s instead.
    runner = web.AppRunner(
        build_app(state),
        handler_cancellation=True,
        shutdown_timeout=grace,
        keepalive_timeout=cfg.header_timeout_s,
    )
    loop = asyncio.get_running_loop()
    handover = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGUSR1, handover.set)
    tasks: list[asyncio.Task[None]] = []
    listener: LeanListener | None = None
    splicer: Splicer | None = None
    try:
        await runner.setup()
        if server == "lean":
            splicer = await Splicer.serve(runner)
            listener = await LeanListener.start(state, splicer, cfg.host, cfg.port)
            host, port = listener.address
        else:
            await web.TCPSite(runner, cfg.host, cfg.port, reuse_port=True).start()
            host, port = runner.addresses[0][:2]
        tasks = [asyncio.create_task(scrape_loop(state, stop)), asyncio.create_task(probe_loop(state, stop))]
        for src in cfg.kv_sources:
            state.follow_kv_events(src)
        if cfg.discovery is not None:
            connect = kube_connect or _in_cluster(cfg.discovery.namespace)
            tasks.append(asyncio.create_task(discover(state, cfg.discovery, connect, stop)))
        if on_ready is not None:
            on_ready(f"http://{host}:{port}")
        if ready is not None:
            ready.set()
        await _first(stop, handover)
        if handover.is_set() and not stop.is_set():
            await hand_over(state, runner, listener, cfg.drain_timeout_s - 2 * grace)
        else:
            state.draining = True
        await drain(state, cfg.drain_timeout_s - 2 * grace)  # then: the lean listener, aiohttp, a grace each
    finally:
        state.draining = True
        state.unfollow_all_kv_events()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if listener is not None:
            await listener.close(grace)
        await runner.cleanup()
        if splicer is not None:
            splicer.remove()
        for t in list(state.background):
            t.cancel()
        await asyncio.gather(*state.background, return_exceptions=True)
        if state.http1 is not None:
            state.http1.close()
        await state.session.close()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


async def hand_over(
    state: RouterState, runner: web.AppRunner, listener: LeanListener | None, timeout_s: float
) -> None:
    """SIGUSR1: a successor has started on the same port (both bind with SO_REUSEPORT), so new connections
    are its. Stop listening; answer what open connections still send (never a 503: nobody else can answer
    it on that connection) with ``connection: close``, so their clients reconnect, to the successor; close
    connections once idle for ``HANDOVER_IDLE_S`` (closing one at once would reset a request its client had
    just sent on it); return when none is left, or after ``timeout_s``. Unlike SIGTERM's drain, which keeps
    accepting so a load balancer sees 503s and /ready fail, this loses no request."""
    state.handing_over = True
    if listener is not None and listener.server is not None:
        listener.server.close()  # (the lean front's aiohttp site, a private Unix socket, serves on)
    else:
        for site in list(runner.sites):
            await site.stop()
    log.info("handing over: stopped listening; %d requests in flight", state.inflight)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    quiet_since = loop.time()
    while loop.time() < deadline:
        now = loop.time()
        if state.inflight:
            quiet_since = now
        # aiohttp's connections (spliced ones included) close after their next answer (``generate`` forces
        # it) or their keep-alive timeout (``header_timeout_s``).
        if listener is not None:
            listener.close_idle(now - HANDOVER_IDLE_S)
            if not state.inflight and not listener.connections and not listener.fallback.connections:
                return
        elif now - quiet_since >= state.cfg.header_timeout_s:
            # aiohttp lists its connections through no public API; none outlives its keep-alive timeout
            # idle, and every answer since the hand-over closed its own.
            return
        await asyncio.sleep(0.05)


async def drain(state: RouterState, timeout_s: float) -> None:
    """Until no generation request is in flight, or ``timeout_s`` (the rest are cut by the shutdown)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    while state.inflight and loop.time() < deadline:
        state.idle.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.idle.wait(), deadline - loop.time())


def _in_cluster(namespace: str) -> Callable[[], KubeClient]:
    def connect() -> KubeClient:
        from infctl.kube.client import ClientSettings
        from infctl.kube.client import connect as kube_connect

        return kube_connect(ClientSettings(namespace=namespace))

    return connect


LoopKind = Literal["auto", "uvloop", "asyncio"]


def run(
    cfg: RouterConfig,
    *,
    loop: LoopKind = "auto",
    upstream_client: UpstreamClient = "lean",
    server: ServerKind = "lean",
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """The one sync entry point (the CLI's). ``loop``: ``auto`` runs on uvloop when it is installed
    (``pip install 'infctl[fast]'``) and on asyncio's own loop otherwise; ``uvloop`` requires it;
    ``asyncio`` never uses it (``bench_router_overhead.py --loops asyncio,uvloop`` compares them).
    ``on_listening`` receives the base URL once the router listens: its tokenizer loaded, its port bound
    (the one picked for ``port: 0``); never when start-up fails."""

    def listening(url: str) -> None:
        _freeze_startup_objects(url)
        if on_listening is not None:
            on_listening(url)

    with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
        runner.run(serve(cfg, upstream_client=upstream_client, server=server, on_ready=listening))


def _freeze_startup_objects(_url: str) -> None:
    """Move everything alive once the router listens (modules, config, the app: ~80k objects that live as
    long as the process) out of the garbage collector's reach. Each full collection scanned them all
    (30-90 ms on a loaded 2-core machine: a latency spike for whatever request was in flight), and so did
    the interpreter's final collections at exit, which made a SIGTERM with nothing in flight take 0.4-2 s.

    The young-generation threshold stays CPython's (700): raising it to 50,000 (at 80 req/s the default
    runs a young collection every ~7 requests) did not help, measured paired per round
    (``bench_router_overhead.py --baseline``: added TTFT p50 tie at 40 req/s, 0.11 ms worse at 80).

    No ``gc.collect()`` first: here it found ~5 unreachable objects (the collections the imports set off
    took the rest) and cost 30-40 ms of CPU between listening and answering the first request."""
    gc.freeze()


def loop_factory(kind: LoopKind) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop constructor for ``kind`` (None: asyncio's default)."""
    if kind == "asyncio":
        return None
    try:
        # Imported by name: uvloop is an optional dependency, so type checkers may not have it.
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if kind == "uvloop":
            raise ConfigError(
                "--loop uvloop: uvloop is not installed", hint="pip install 'infctl[fast]' (or uvloop)"
            ) from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
