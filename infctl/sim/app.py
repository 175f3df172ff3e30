"""One simulated engine instance: core + driver + personality behind an aiohttp listener.

Common endpoints live here (``/v1/models``, ``/health``, ``/metrics``, ``/admin/faults``); generation is in
``routes``; engine-specific endpoints come from the personality. A crash (``--fault crash-after``) closes
the listener and resets every open connection without a response, as a killed engine would.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from infctl.errors import ConfigError
from infctl.sim import routes
from infctl.sim.driver import Driver, SimClock
from infctl.sim.faults import FaultState, plan_update
from infctl.sim.kv_events import KVEventPublisher, bind_ranks
from infctl.sim.personality import get_personality
from infctl.sim.personality.base import Personality
from infctl.sim.personality.engine_view import Capacity, EngineMetrics
from infctl.sim.personality.http_json import SimHTTPError, json_response
from infctl.sim.personality.pd import BootstrapRegistry
from infctl.sim.profiles import SimProfile, get_profile
from infctl.sim.scheduler import EngineCore
from infctl.sim.settings import SimSettings
from infctl.sim.types import CoreStats, KVEvent, SimRequest
from infctl.telemetry.kv_events import AllBlocksCleared
from infctl.tokenization import Tokenizer, load_tokenizer

SHUTDOWN_SECONDS = 2.0
"""How long a clean stop waits for in-flight responses before closing their connections."""


async def listen(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on host:port (0: any free port); the runner and the port it got. A port in use is a
    ConfigError saying what to do, not a traceback."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as err:
        await runner.cleanup()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {err.strerror}",
            hint="pick another --port (instance i uses port + i), or stop what is using it",
        ) from None
    return runner, int(runner.addresses[0][1])


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def base_url(host: str, port: int) -> str:
    """The URL clients reach a listener on ``host:port`` at (a wildcard host is reached on 127.0.0.1)."""
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"


def reset_connections(runner: web.AppRunner) -> None:
    """Reset every open connection of ``runner`` without a response, as a killed engine's would be."""
    server = runner.server
    for conn in server.connections if server is not None else []:
        if conn.transport is not None:
            conn.transport.abort()


def kv_publishers(settings: SimSettings, index: int, host: str, ranks: int) -> list[KVEventPublisher]:
    """Engine ``index``'s KV-event publishers, one per data-parallel rank (none when KV events are off).

    With ``--kv-events-port P`` engine i's rank r binds P + i * ranks + r, the layout vLLM and SGLang give
    one engine's ranks (base port + rank), engines laid out one after another; P 0: any free ports."""
    port = settings.kv_events_port
    if port is None:
        return []
    return bind_ranks(
        "*" if host in ("0.0.0.0", "") else host,
        port + index * ranks if port else None,
        ranks,
        topic=settings.kv_events_topic,
        encoding=settings.kv_events_encoding,
    )


def fastapi_routes(defs: Sequence[web.AbstractRouteDef]) -> list[web.AbstractRouteDef]:
    """``defs`` as FastAPI serves them: a GET route does not answer HEAD (aiohttp's would; FastAPI's
    ``APIRoute`` adds no HEAD, so vLLM 0.32 answers HEAD /health with 405, seen on the CPU build)."""
    return [
        web.RouteDef(d.method, d.path, d.handler, {**d.kwargs, "allow_head": False})
        if isinstance(d, web.RouteDef) and d.method == "GET"
        else d
        for d in defs
    ]


def _first_method(app: web.Application, path: str) -> str | None:
    """The method of the first route registered at ``path``."""
    for resource in app.router.resources():
        if resource.get_info().get("path") == path:
            for route in resource:
                return route.method
    return None


def fastapi_error(request: web.Request, exc: web.HTTPException) -> web.Response:
    """aiohttp's 404/405 in FastAPI's shape, which both real engines answer with: ``{"detail": reason}``;
    a 405 names in ``Allow`` the method of the first route at the path (Starlette's router stops at the
    first route whose path matches; vLLM's routes have one method each: HEAD /ping is ``Allow: GET``)."""
    resp = json_response({"detail": exc.reason}, status=exc.status)
    if exc.status == 405:
        resp.headers["Allow"] = _first_method(request.app, request.path) or exc.headers.get("Allow") or ""
    return resp


def engine_middleware(personality: Personality) -> Middleware:
    """Errors as the engine shapes them, and ``x-request-id`` on every answer when the personality echoes it
    (``Personality.echoes_request_id``): the client's, else a new one, as vLLM's ``XRequestIdMiddleware``."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resp = await handler(request)
        except SimHTTPError as err:
            resp = json_response(personality.error_body(err), status=err.status)
        except web.HTTPException as exc:
            resp = fastapi_error(request, exc)
        if not resp.prepared and "x-request-id" not in resp.headers and personality.echoes_request_id():
            resp.headers["x-request-id"] = request.headers.get("x-request-id") or uuid.uuid4().hex
        return resp

    return middleware


@dataclass(frozen=True, slots=True)
class Shared:
    """What every engine of one ``infctl sim`` process shares."""

    clock: SimClock
    """Simulated time (one clock, so every engine's timings agree)."""
    registry: BootstrapRegistry
    """SGLang PD bootstrap rendezvous among the process's engines."""
    profile: SimProfile
    """The engine core's profile, with the CLI overrides applied."""
    capacity: Capacity
    """The capacity figures the HTTP surface reports (``/v1/models``, ``/metrics``), from ``profile``."""
    tokenizer: Tokenizer
    """What turns prompts into token ids (``cfg.tokenizer``), loaded once for every engine."""

    @classmethod
    def for_settings(cls, cfg: SimSettings) -> Shared:
        """A new clock and registry, ``cfg``'s profile with its overrides and its tokenizer (needs a running
        loop; TokenizerError when the tokenizer does not load)."""
        profile = get_profile(cfg.profile).with_overrides(**cfg.profile_overrides())
        capacity = Capacity(
            block_size=profile.block_size,
            num_gpu_blocks=profile.num_gpu_blocks,
            max_model_len=profile.max_model_len,
            max_num_seqs=profile.max_num_seqs,
            max_num_batched_tokens=profile.max_num_batched_tokens,
            enable_prefix_caching=profile.enable_prefix_caching,
        )
        tokenizer = load_tokenizer(cfg.tokenizer)
        return cls(SimClock(cfg.time_scale), BootstrapRegistry(), profile, capacity, tokenizer)


class SimInstance:
    """One engine: implements the ``EngineView`` a personality reads."""

    def __init__(self, settings: SimSettings, index: int, shared: Shared) -> None:
        profile, clock = shared.profile, shared.clock
        self.settings = settings
        self.index = index
        self.model = settings.model or profile.model
        self.host = settings.host
        base = settings.first_port
        self.port = base + index if base else 0
        self.engine_id = str(uuid.uuid4())
        self.role = settings.role_of(index)
        self.capacity = shared.capacity
        self.tokenizer = shared.tokenizer
        self.registry = shared.registry
        self.clock = clock
        self.faults = FaultState(settings.faults, seed=index)
        self.personality = get_personality(settings.personality)(self)
        self.metrics = EngineMetrics(self.personality.buckets())
        self.publisher: KVEventPublisher | None = None
        kv_events = settings.kv_events_port is not None
        # The served name seeds the block hashes, as routers seed their prefix index with it.
        core = EngineCore(
            profile,
            role=self.role,
            kv_events=kv_events,
            hash_seed=self.model,
            offload=settings.offload_tier(),
        )
        self.driver = Driver(
            core,
            clock,
            self.faults,
            self.metrics,
            kv_sink=self._publish if kv_events else None,
            request_overhead=profile.request_overhead,
        )
        self.crashed = asyncio.Event()
        self.server_load = 0
        self.pd_waiting = 0
        self._seq = 0
        self._runner: web.AppRunner | None = None
        self._teardown: asyncio.Task[None] | None = None

    # -- EngineView --------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    @property
    def kv_endpoint(self) -> str | None:
        return self.publisher.endpoint if self.publisher else None

    def stats(self) -> CoreStats:
        return self.driver.stats()

    def now(self) -> float:
        return self.clock.now()

    def gen_throughput(self) -> float:
        return self.driver.gen_throughput()

    def reset_cache(self) -> bool:
        if not self.driver.reset_cache():
            return False
        if self.publisher is not None:
            self.publisher.publish([AllBlocksCleared()])
        return True

    def next_request_id(self, external: str) -> str:
        """A core request id unique in this instance even when clients reuse x-request-id."""
        self._seq += 1
        return f"{self._seq}-{external}"

    async def probe(self) -> bool:
        req = SimRequest(self.next_request_id("health"), [0], 1, self.now())
        track = self.driver.submit(req)
        try:
            while not (await asyncio.wait_for(track.queue.get(), 30.0)).finished:
                pass
        except TimeoutError:
            self.driver.abort(req.request_id)
            return False
        return track.finish_reason in ("length", "stop")

    def _publish(self, events: Sequence[KVEvent]) -> None:
        if self.publisher is not None:
            self.publisher.publish(events)

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        s = self.settings
        publishers = kv_publishers(s, self.index, self.host, 1)
        if publishers:
            self.publisher = publishers[0]
        self._runner, self.port = await listen(self._build_app(), self.host, self.port)
        self.personality.on_start()
        self.driver.start()
        self.faults.on_crash = self.crash
        self.faults.arm_crash()

    async def stop(self) -> None:
        self.faults.close()
        if self._teardown is not None:
            await self._teardown
            return
        await self.driver.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None

    def crash(self) -> None:
        """Die abruptly: no more steps, every connection reset, the listener closed."""
        if self.crashed.is_set() or self._runner is None:
            return
        self.crashed.set()
        self.driver.kill()
        self.personality.on_crash()
        reset_connections(self._runner)
        self._teardown = asyncio.create_task(self._crash_teardown())

    async def _crash_teardown(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None

    # -- HTTP ----------------------------------------------------------------------------------------------
    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[engine_middleware(self.personality)], client_max_size=64 * 1024**2)

        def bind(f: Callable[..., Awaitable[web.StreamResponse]]) -> Handler:
            return functools.partial(f, self)

        app.add_routes(fastapi_routes([
            web.post("/v1/completions", bind(routes.completions)),
            web.post("/v1/chat/completions", bind(routes.chat_completions)),
            web.get("/v1/models", self._models),
            web.get("/health", self._health),
            web.route("*", "/metrics", self._metrics),
            web.get("/admin/faults", self._faults_get),
            web.post("/admin/faults", self._faults_post),
            web.delete("/admin/faults", self._faults_delete),
            *self.personality.routes(),
        ]))  # fmt: skip
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return json_response({"object": "list", "data": [self.personality.model_card(int(time.time()))]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self.faults.plan.health_fail else 200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.personality.render_metrics().encode(),
            headers={"Content-Type": self.personality.metrics_content_type_for(request.method)},
        )

    def _faults_view(self) -> dict[str, Any]:
        return {"faults": self.faults.plan.active(), "crashed": self.crashed.is_set()}

    async def _faults_get(self, request: web.Request) -> web.Response:
        return json_response(self._faults_view())

    async def _faults_post(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return json_response({"error": "the body is not valid JSON"}, status=400)
        try:
            update = plan_update(body)
            self.faults.update(update)
        except (ConfigError, TypeError, ValueError) as err:
            return json_response({"error": getattr(err, "message", str(err))}, status=400)
        return json_response(self._faults_view())

    async def _faults_delete(self, request: web.Request) -> web.Response:
        self.faults.clear()
        return json_response(self._faults_view())
