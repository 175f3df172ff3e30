"""SGLang PD with a data-parallel prefill engine: each rank of the prefill engine is its own target, and a
prefill leg pinned to rank r must carry a bootstrap room that leads the engine to rank r.

The engines here are small real aiohttp servers on 127.0.0.1 that keep SGLang's rule (read in 0.5.15 and
0.5.23; ``infctl.engines.base.new_bootstrap_room``): a PD prefill engine serves a request on the rank it is
pinned to (``X-Data-Parallel-Rank``, ``routed_dp_rank``, ``data_parallel_rank``) or else on rank
``bootstrap_room % dp_size``, and a pinned rank other than the room's fails the transfer
("follow_bootstrap_room conflict", ``srt/disaggregation/common/conn.py``); the decode engine looks for the KV
on the room's rank and fails the request when the prefill did. The simulator does not give data-parallel
ranks PD roles. A rank count that does not divide ``ROOM_RANK_STRIDE`` (17) needs the backends' ``dp_size``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aiohttp import web

from infctl.engines import get_adapter
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "m"
StartRouter = Callable[..., Awaitable[str]]


@dataclass
class FakePD:
    """A prefill engine with ``dp_size`` ranks and a decode engine meeting it by bootstrap room."""

    dp_size: int
    prefill_url: str = ""
    decode_url: str = ""
    served: list[int] = field(default_factory=list)
    """The rank each prefill leg ran on, in arrival order."""
    conflicts: list[str] = field(default_factory=list)
    rooms: dict[int, asyncio.Future[bool]] = field(default_factory=dict)

    def room(self, room: int) -> asyncio.Future[bool]:
        return self.rooms.setdefault(room, asyncio.get_running_loop().create_future())

    def metrics(self) -> str:
        lines = []
        for rank in range(self.dp_size):
            for name in ("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage"):
                lines.append(f'{name}{{model_name="{MODEL}",dp_rank="{rank}"}} 0')
        return "\n".join(lines) + "\n"


def _pinned(request: web.Request, body: dict[str, Any]) -> int | None:
    header = get_adapter("sglang").dp_rank_header
    assert header is not None
    for pin in (request.headers.get(header), body.get("routed_dp_rank"), body.get("data_parallel_rank")):
        if pin is not None:
            return int(pin)
    return None


def _answer(ok: bool, message: str = "") -> web.Response:
    if not ok:
        return web.json_response({"object": "error", "message": message, "code": 500}, status=500)
    choice = {"index": 0, "text": " ok", "finish_reason": "length"}
    return web.json_response({"choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})


async def _serve(app: web.Application, runners: list[web.AppRunner]) -> str:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    runners.append(runner)
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


@pytest.fixture(params=[4, 17])
async def pd(request: pytest.FixtureRequest) -> AsyncIterator[FakePD]:
    fake = FakePD(request.param)
    dp_size = fake.dp_size

    async def prefill(request: web.Request) -> web.Response:
        body = await request.json()
        room = int(body["bootstrap_room"])
        rank = _pinned(request, body)
        rank = room % dp_size if rank is None else rank
        fake.served.append(rank)
        ok = rank == room % dp_size
        if not ok:
            fake.conflicts.append(
                f"dispatched to dp_rank {rank} but bootstrap_room {room} implies dp_rank {room % dp_size}"
            )
        fake.room(room).set_result(ok)
        return _answer(ok, "follow_bootstrap_room conflict")

    async def decode(request: web.Request) -> web.Response:
        body = await request.json()
        ok = await asyncio.wait_for(fake.room(int(body["bootstrap_room"])), 10)
        return _answer(ok, "KV transfer from the prefill failed")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=fake.metrics())

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    runners: list[web.AppRunner] = []
    urls = []
    for handler in (prefill, decode):
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/health", health)
        urls.append(await _serve(app, runners))
    fake.prefill_url, fake.decode_url = urls
    try:
        yield fake
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_each_prefill_leg_has_a_room_for_the_rank_it_is_pinned_to(
    pd: FakePD, start_router: StartRouter
) -> None:
    # 4 ranks divide the fallback stride: the router need not know the count (and counts each such room);
    # 17 do not, and the backends say how many ranks their engine has.
    size = pd.dp_size if pd.dp_size == 17 else None
    backends = [
        Backend(
            id=f"p{r}",
            url=pd.prefill_url,
            dp_rank=r,
            dp_size=size,
            engine="sglang",
            role="prefill",
            group="g0",
        )
        for r in range(pd.dp_size)
    ]
    backends.append(Backend(id="d", url=pd.decode_url, engine="sglang", role="decode", group="g0"))
    url = await start_router(backends, engine="sglang", pd_min_uncached_tokens=16)
    prompt = " ".join(f"w{i}" for i in range(300))
    async with httpx.AsyncClient(timeout=30) as c:
        deadline = asyncio.get_running_loop().time() + 60.0
        while True:  # until every rank is scraped: before that a rank counts as saturated
            listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
            if all(b["signals_age_s"] is not None for b in listed):
                break
            assert asyncio.get_running_loop().time() < deadline, listed
            await asyncio.sleep(0.05)
        answers = []
        for rank in range(pd.dp_size):  # each rank in turn, the others drained
            for r in range(pd.dp_size):
                drain = {"draining": r != rank}
                assert (await c.post(f"{url}/admin/backends/p{r}/drain", json=drain)).status_code == 200
            for _ in range(2):
                body = {"model": MODEL, "prompt": prompt, "max_tokens": 2}
                answers.append(await c.post(f"{url}/v1/completions", json=body))
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert pd.conflicts == []
    assert [a.status_code for a in answers] == [200] * len(answers), [a.text for a in answers]
    assert pd.served == [r for r in range(pd.dp_size) for _ in range(2)]
    assert value(metrics, "infctl_router_retries_total") == 0
    fallback = value(metrics, "infctl_router_pd_rooms_without_dp_size_total")
    assert fallback == (0 if size else 2 * pd.dp_size)
