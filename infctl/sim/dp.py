"""A data-parallel simulated engine: N ranks behind one listener, as vLLM ``--data-parallel-size N`` (internal
load balancing) and SGLang ``--dp-size N`` serve them.

Each rank is a :class:`SimRank`, a full simulated engine (own core, KV pool, scheduler, counters) without a
listener of its own. The :class:`DPEngine` listens once and:

* places a generation request on the rank it pins, read the engine's way (vLLM the ``x-data-parallel-rank``
  header, SGLang 0.5.x the ``data_parallel_rank`` body field), or on the rank the engine's own balancing
  picks (:func:`pick_rank`); a rank outside ``[0, N)`` is a 400. An SGLang PD prefill places it on rank
  ``bootstrap_room % N`` (``Personality.room_rank``), and a pin to another rank fails its transfer;
* serves one ``/metrics`` for all ranks (:func:`merge_expositions`): vLLM labels every series ``engine="r"``,
  SGLang its scheduler gauges ``dp_rank="r"`` while its tokenizer counters stay engine-wide (added up);
* answers the load endpoints for all ranks (vLLM ``/load``, SGLang ``/v1/loads`` with one entry per rank);
* shares one fault plan among the ranks (``/admin/faults``); a crash takes the whole engine down;
* publishes KV events the vLLM way: one publisher per rank, rank r on the engine's base port + r, its
  batches tagged ``data_parallel_rank`` r (:func:`infctl.sim.kv_events.bind_ranks`); ``kv_endpoint`` is
  rank 0's.

Not simulated with data parallelism yet: vLLM's PD roles (a ConfigError says so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.errors import ConfigError
from infctl.sim import routes
from infctl.sim.app import (
    Handler,
    Shared,
    SimInstance,
    base_url,
    engine_middleware,
    fastapi_routes,
    kv_publishers,
    listen,
    reset_connections,
)
from infctl.sim.faults import FaultState, plan_update
from infctl.sim.personality import get_personality
from infctl.sim.personality.base import DPBalance
from infctl.sim.personality.http_json import SimHTTPError, json_response
from infctl.sim.settings import SimSettings
from infctl.telemetry.exposition import go_float

if TYPE_CHECKING:
    pass

RankHandler = Callable[[SimInstance, web.Request], Awaitable[web.StreamResponse]]
"""A generation handler of ``infctl.sim.routes``, given the rank that serves the request."""


def pick_rank(balance: DPBalance, loads: Sequence[tuple[int, int]], turn: int) -> int:
    """The rank an unpinned request goes to. ``loads``: (waiting, running) per rank, where waiting counts
    every request the engine accepted that is not running yet; ``turn``: requests placed so far.

    ``least_loaded`` is vLLM's choice (least ``4 * waiting + running``, ties to the lowest rank);
    ``round_robin`` is SGLang's default."""
    if balance == "round_robin":
        return turn % len(loads)
    scores = [4 * waiting + running for waiting, running in loads]
    return scores.index(min(scores))


def merge_expositions(texts: Sequence[str]) -> str:
    """Several Prometheus text expositions as one: each family's HELP/TYPE once, then its samples in order of
    first appearance; samples with the same name and labels (an engine-wide series every rank renders) are
    added up, which is right for counters and histogram buckets."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, dict[str, float]] = {}
    for text in texts:
        family = ""
        for line in text.splitlines():
            if not line:
                continue
            if line.startswith("#"):
                parts = line.split(" ", 3)
                family = parts[2] if len(parts) > 2 else family
                if family not in headers:
                    headers[family] = []
                    samples[family] = {}
                if len(headers[family]) < 2 and line not in headers[family]:
                    headers[family].append(line)
                continue
            key, _, value = line.rpartition(" ")
            series = samples.setdefault(family, {})
            headers.setdefault(family, [])
            series[key] = series.get(key, 0.0) + float(value)
    out: list[str] = []
    for family, lines in headers.items():
        out += lines
        out += [f"{key} {go_float(value)}" for key, value in samples[family].items()]
    return "\n".join(out) + "\n"


class SimRank(SimInstance):
    """One rank of a :class:`DPEngine`: a simulated engine whose requests reach it through the DP engine."""

    def __init__(
        self,
        settings: SimSettings,
        index: int,
        rank: int,
        shared: Shared,
        faults: FaultState,
    ) -> None:
        super().__init__(settings, index, shared)
        self.dp_rank = rank
        self.personality = get_personality(settings.personality)(self, rank)
        self.faults = faults
        self.driver.faults = faults

    async def start(self) -> None:
        """Start stepping; the DP engine listens for every rank."""
        self.driver.start()

    def crash(self) -> None:
        if not self.crashed.is_set():
            self.crashed.set()
            self.driver.kill()


class DPEngine:
    """``settings.data_parallel_size`` ranks of one simulated engine, served on one port (see the module
    doc)."""

    def __init__(self, settings: SimSettings, index: int, shared: Shared) -> None:
        ranks = settings.data_parallel_size
        if ranks < 1:
            raise ConfigError(f"data-parallel size {ranks} must be at least 1", hint="use 1 or more ranks")
        if settings.role_of(index) != "both" and not get_personality(settings.personality).dp_pd_roles:
            raise ConfigError(
                "the simulator does not model PD roles of data-parallel engines yet",
                hint="drop --role, or --data-parallel-size (one rank per instance)",
            )
        self.settings = settings
        self.index = index
        self.faults = FaultState(settings.faults, seed=index)
        self.ranks = [SimRank(settings, index, r, shared, self.faults) for r in range(ranks)]
        first = self.ranks[0]
        self.model, self.role, self.host, self.port = first.model, first.role, first.host, first.port
        self.kv_endpoint: str | None = None
        self.crashed = asyncio.Event()
        self._placed = 0
        self._runner: web.AppRunner | None = None
        self._teardown: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def place(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> SimRank:
        """The rank that serves a request (raises SimHTTPError for a pin outside the engine's ranks)."""
        persona = self.ranks[0].personality
        rank = persona.pinned_rank(headers, body)
        n = len(self.ranks)
        follow = persona.room_rank(body, n)
        if rank is None and follow is not None:
            rank = follow
        elif rank is None:
            loads = [(max(r.server_load - r.stats().running, 0), r.stats().running) for r in self.ranks]
            rank = pick_rank(persona.dp_balance, loads, self._placed)
        elif not 0 <= rank < n:
            raise SimHTTPError(400, f"data_parallel_rank {rank} is out of range [0, {n}).")
        elif follow is not None and rank != follow:
            raise self.ranks[rank].personality.room_conflict(body, rank, n)
        self._placed += 1
        return self.ranks[rank]

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        publishers = kv_publishers(self.settings, self.index, self.host, len(self.ranks))
        for rank, publisher in zip(self.ranks, publishers, strict=False):
            rank.publisher = publisher
        if publishers:
            self.kv_endpoint = publishers[0].endpoint  # rank r's is this port + r
        for rank in self.ranks:
            await rank.start()
        self._runner, self.port = await listen(self._build_app(), self.host, self.port)
        self.faults.on_crash = self.crash
        self.faults.arm_crash()

    async def stop(self) -> None:
        self.faults.close()
        await asyncio.gather(*(rank.stop() for rank in self.ranks))
        if self._teardown is not None:
            await self._teardown
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def crash(self) -> None:
        """Every rank dies and the listener closes, resetting open connections."""
        if self.crashed.is_set():
            return
        self.crashed.set()
        for rank in self.ranks:
            rank.crash()
        runner, self._runner = self._runner, None
        if runner is not None:
            reset_connections(runner)
            self._teardown = asyncio.get_running_loop().create_task(runner.cleanup())

    # -- HTTP --------------------------------------------------------------------------------------------
    def _build_app(self) -> web.Application:
        app = web.Application(
            middlewares=[engine_middleware(self.ranks[0].personality)], client_max_size=64 * 1024**2
        )
        first = self.ranks[0]
        shared = first.personality.dp_routes([r.personality for r in self.ranks])
        taken = {(r.method, r.path) for r in shared if isinstance(r, web.RouteDef)}
        single = [
            r for r in first.personality.routes()
            if not (isinstance(r, web.RouteDef) and (r.method, r.path) in taken)
        ]  # fmt: skip
        app.add_routes(fastapi_routes([
            web.post("/v1/completions", self._generate(routes.completions, chat=False)),
            web.post("/v1/chat/completions", self._generate(routes.chat_completions, chat=True)),
            web.get("/v1/models", first._models),
            web.get("/health", first._health),
            web.route("*", "/metrics", self._metrics),
            web.get("/admin/faults", self._faults),
            web.post("/admin/faults", self._faults),
            web.delete("/admin/faults", self._faults),
            *shared,
            *single,
        ]))  # fmt: skip
        return app

    def _generate(self, handler: RankHandler, *, chat: bool) -> Handler:
        async def serve(request: web.Request) -> web.StreamResponse:
            # aiohttp keeps the body's bytes: the rank's handler reads them again.
            body = await self.ranks[0].personality.read_generation(request, chat=chat)
            return await handler(self.place(request.headers, body), request)

        return serve

    async def _metrics(self, request: web.Request) -> web.Response:
        text = merge_expositions([r.personality.render_metrics() for r in self.ranks])
        kind = self.ranks[0].personality.metrics_content_type_for(request.method)
        return web.Response(body=text.encode(), headers={"Content-Type": kind})

    async def _faults(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            try:
                self.faults.update(plan_update(await request.json()))
            except (ConfigError, TypeError, ValueError) as err:
                return json_response({"error": getattr(err, "message", str(err))}, status=400)
        elif request.method == "DELETE":
            self.faults.clear()
        return json_response({"faults": self.faults.plan.active(), "crashed": self.crashed.is_set()})
