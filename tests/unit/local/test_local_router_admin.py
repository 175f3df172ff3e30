"""What the supervisor sends the router's admin API, for plain and data-parallel engines."""

from __future__ import annotations

import json
from typing import Any

import httpx

from infctl.local.router_admin import RouterAdmin
from infctl.local.spec import ProcessSpec

ROUTER = "http://127.0.0.1:9000"


def engine(ranks: int, kv: int | None = 5557) -> ProcessSpec:
    ports = {} if kv is None else {"kv_events": kv, **{f"kv_events.dp{r}": kv + r for r in range(1, ranks)}}
    return ProcessSpec(
        name="engine-0",
        kind="engine",
        argv=("sim",),
        port=8001,
        role="both",
        ports=ports,
        data_parallel_size=ranks,
    )


class FakeRouter:
    """Records calls and answers them like the router (ids decoded from the path)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.calls.append((request.method, request.url.path, body))
        return httpx.Response(200, json={})


async def calls(do: Any) -> list[tuple[str, str, Any]]:
    fake = FakeRouter()
    async with httpx.AsyncClient(transport=httpx.MockTransport(fake)) as client:
        await do(RouterAdmin(client, ROUTER, token="t"))
    return fake.calls


async def test_a_data_parallel_engine_is_registered_once_per_rank_with_the_base_endpoint() -> None:
    async def add(admin: RouterAdmin) -> None:
        await admin.add(engine(2))

    assert await calls(add) == [
        (
            "PUT",
            f"/admin/backends/http://127.0.0.1:8001#dp{r}",
            {
                "url": "http://127.0.0.1:8001",
                "role": "both",
                "kv_events": "tcp://127.0.0.1:5557",
                "dp_rank": r,
            },
        )
        for r in (0, 1)
    ]


async def test_a_one_rank_engine_is_one_backend_without_a_rank() -> None:
    async def add(admin: RouterAdmin) -> None:
        await admin.add(engine(1, kv=None))

    assert await calls(add) == [
        ("PUT", "/admin/backends/http://127.0.0.1:8001", {"url": "http://127.0.0.1:8001", "role": "both"}),
    ]


async def test_rank_ids_are_escaped_so_the_rank_is_not_a_fragment() -> None:
    seen: list[str] = []

    def raw(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(raw)) as client:
        admin = RouterAdmin(client, ROUTER)
        await admin.drain("http://127.0.0.1:8001#dp1")
        await admin.remove("http://127.0.0.1:8001#dp1")
    assert seen == [
        "/admin/backends/http://127.0.0.1:8001%23dp1/drain",
        "/admin/backends/http://127.0.0.1:8001%23dp1",
    ]


async def test_a_prefill_engine_is_registered_with_its_own_bootstrap_port() -> None:
    from infctl.router.admin_validate import backend_from_json

    prefill = ProcessSpec(name="engine-g1-prefill-0", kind="engine", argv=("sim",), port=8002, role="prefill",
                          group="g1", ports={"bootstrap": 18030})  # fmt: skip

    async def add(admin: RouterAdmin) -> None:
        await admin.add(prefill, engine="sglang")

    ((method, _, body),) = await calls(add)
    assert method == "PUT" and body["bootstrap_port"] == 18030
    backend, _ = backend_from_json(body)  # what the router makes of it
    assert (backend.role, backend.group, backend.bootstrap_port) == ("prefill", "g1", 18030)
