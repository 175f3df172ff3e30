"""The admin API over HTTP (issue 3): policy writes keep upstream weights, the active policy reads back,
backend bodies are validated, booleans are booleans, the Bearer scheme is case-insensitive, 401s challenge."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from infctl.doctor.router_eval import policy_of
from infctl.router.snapshot import Backend

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
AUTH = {"authorization": "Bearer s3cret"}
JSON = {"content-type": "application/json"}
NOWHERE = "http://127.0.0.1:9"


async def test_policy_put_keeps_upstream_weights_unless_it_sets_them(start_sim, start_router) -> None:
    sim = await start_sim(instances=2)
    old, new = sim.urls
    backends = [Backend(id="old", url=old, upstream="default"), Backend(id="new", url=new, upstream="new")]
    url = await start_router(backends, admin_token="s3cret", policy="round_robin")
    split = {"weights": {"default": 100, "new": 0}, "mirror": {"to": "shadow", "percent": 50}}
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as c:
        r = await c.put(f"{url}/admin/upstreams", json=split, headers={"if-match": "0"})
        assert r.status_code == 200
        r = await c.put(f"{url}/admin/policy", json="cache_aware")
        assert r.status_code == 200 and r.json()["upstreams_version"] == 1
        view = (await c.get(f"{url}/admin/upstreams")).json()
        assert view["weights"] == {"default": 100.0, "new": 0.0}
        assert view["mirror"] == {"to": "shadow", "percent": 50.0} and view["version"] == 1
        for i in range(6):  # the split still routes: "new" has weight 0
            body = {"model": MODEL, "prompt": f"q{i}", "max_tokens": 1}
            assert (await c.post(f"{url}/v1/completions", json=body)).status_code == 200
        assert (await c.get(f"{url}/admin/upstreams")).json()["served"] == {"default": 6}
        # A policy that names upstreams is an upstream write: If-Match is honoured and the version moves.
        with_split = {"preset": "least_load", "upstreams": {"weights": {"new": 1}}}
        stale = await c.put(f"{url}/admin/policy", json=with_split, headers={"if-match": "0"})
        assert stale.status_code == 412
        assert (await c.get(f"{url}/admin/policy")).json()["name"] == "cache_aware"
        r = await c.put(f"{url}/admin/policy", json=with_split, headers={"if-match": "1"})
        assert r.status_code == 200 and r.json()["upstreams_version"] == 2
        view = (await c.get(f"{url}/admin/upstreams")).json()
        assert view["weights"] == {"new": 1.0} and view["mirror"] is None and view["version"] == 2


async def test_get_policy_reads_back_what_is_active(start_router) -> None:
    url = await start_router([Backend(id="a", url="http://127.0.0.1:9")], policy="round_robin")
    custom = {"preset": "cache_aware", "settings": {"gate_abs": 8, "stale_after_s": 0.5}}
    async with httpx.AsyncClient(timeout=10) as c:
        first = (await c.get(f"{url}/admin/policy")).json()
        assert first["config"] == "round_robin" and first["settings"]["gate_abs"] == 32.0
        assert (await c.put(f"{url}/admin/policy", json=custom)).status_code == 200
        got = (await c.get(f"{url}/admin/policy")).json()
        assert got["name"] == "cache_aware" and got["config"] == custom and got["index"] == "approx"
        assert got["settings"]["gate_abs"] == 8.0 and got["settings"]["stale_after_s"] == 0.5
        assert got["settings"]["saturation_kv"] == 0.8  # defaults are shown too: every active value
        assert policy_of(got["config"]).settings.gate_abs == 8.0  # what `infctl doctor` evaluates
        weights = {"weights": {"default": 3}}
        put = await c.put(f"{url}/admin/upstreams", json=weights, headers={"if-match": '"0"'})
        assert put.status_code == 200
        got_again = await c.get(f"{url}/admin/policy")
        again = got_again.json()
        assert again["config"]["upstreams"] == weights and again["upstreams_version"] == 1
        # The reported config is re-PUTable (with the version it reported) and rebuilds the same policy.
        etag = got_again.headers["etag"]
        assert etag == '"1"'
        assert (await c.put(f"{url}/admin/policy", json=again["config"])).status_code == 428
        r = await c.put(f"{url}/admin/policy", json=again["config"], headers={"if-match": etag})
        assert r.status_code == 200
        after = (await c.get(f"{url}/admin/policy")).json()
        assert after["config"] == again["config"] and after["settings"] == again["settings"]


BAD_BACKENDS: list[tuple[dict[str, Any], str]] = [
    ({"url": "http://127.0.0.1:9", "weight": -1}, "weight"),
    ({"url": "http://127.0.0.1:9", "role": "bogus"}, "role"),
    ({"url": "http://127.0.0.1:9", "dp_rank": "a"}, "dp_rank"),
    ({"url": "ftp//x"}, "url"),
    ({"url": "http://127.0.0.1:9", "models": "abc"}, "models"),
    # A rank publishes at base port + rank: an endpoint without a TCP port is refused before anything changes.
    ({"url": "http://127.0.0.1:9", "dp_rank": 1, "kv_events": "ipc:///tmp/kv"}, "kv_events"),
]


async def test_bad_backends_get_a_400_naming_the_field_and_are_not_added(start_sim, start_router) -> None:
    sim = await start_sim()
    url = await start_router([Backend(id=sim.urls[0], url=sim.urls[0])], admin_token="s3cret")
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as c:
        for body, field in BAD_BACKENDS:
            r = await c.post(f"{url}/admin/backends", json=body)
            assert r.status_code == 400, body
            error = r.json()["error"]
            assert error["type"] == "BadRequestError" and error["code"] == 400
            assert error["message"].startswith(field), error
        r = await c.post(
            f"{url}/admin/backends", content=b'{"url": "http://127.0.0.1:9", "weight": NaN}', headers=JSON
        )
        assert r.status_code == 400
        listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
        assert [b["id"] for b in listed] == [sim.urls[0]]
        r = await c.post(f"{url}/admin/backends", json={"url": "http://127.0.0.1:9/", "dp_rank": 1})
        assert r.status_code == 201 and r.json()["added"] == "http://127.0.0.1:9#dp1"


async def test_drain_takes_only_booleans(start_router) -> None:
    url = await start_router([Backend(id="a", url="http://127.0.0.1:9")])
    async with httpx.AsyncClient(timeout=10) as c:
        for body in ({"draining": "false"}, {"draining": 0}, {"drainig": False}):
            r = await c.post(f"{url}/admin/backends/a/drain", json=body)
            assert r.status_code == 400, body
        listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
        assert listed[0]["draining"] is False
        assert (await c.post(f"{url}/admin/backends/a/drain", headers=JSON)).json()["draining"] is True
        undo = await c.post(f"{url}/admin/backends/a/drain", json={"draining": False})
        assert undo.json()["draining"] is False
        r = await c.put(f"{url}/admin/backends/a/weight", content=b'{"weight": Infinity}', headers=JSON)
        assert r.status_code == 400


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_bearer_scheme_is_case_insensitive(start_router, scheme: str) -> None:
    url = await start_router([Backend(id="a", url="http://127.0.0.1:9")], admin_token="s3cret")
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.get(f"{url}/admin/backends", headers={"authorization": f"{scheme} s3cret"})
        assert r.status_code == 200


async def test_missing_or_wrong_token_is_a_401_with_a_bearer_challenge(start_router) -> None:
    url = await start_router([Backend(id="a", url="http://127.0.0.1:9")], admin_token="s3cret")
    async with httpx.AsyncClient(timeout=10) as c:
        missing = await c.get(f"{url}/admin/policy")
        wrong = await c.put(f"{url}/admin/policy", json="random", headers={"authorization": "Bearer nope"})
        basic = await c.get(f"{url}/admin/policy", headers={"authorization": "Basic s3cret"})
        policy = (await c.get(f"{url}/admin/policy", headers=AUTH)).json()
    for r in (missing, wrong, basic):
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer ")
        assert r.json()["error"]["type"] == "AuthenticationError"
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert "invalid_token" not in missing.headers["www-authenticate"]
    assert policy["name"] == "cache_aware"  # the refused PUT changed nothing


async def test_a_router_without_token_warns_at_startup(start_router, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="infctl.router.admin"):
        await start_router([Backend(id="a", url="http://127.0.0.1:9")], host="0.0.0.0", insecure_admin=True)
        await start_router([Backend(id="a", url="http://127.0.0.1:9")], admin_token="s3cret")
    warnings = [r.getMessage() for r in caplog.records if r.name == "infctl.router.admin"]
    assert len(warnings) == 1 and "OPEN" in warnings[0] and "INFCTL_ROUTER_ADMIN_TOKEN" in warnings[0]


async def test_upstreams_if_match_is_checked_after_the_body_arrives(start_sim, start_router) -> None:
    """Two writers holding version 0: the one whose body arrives last must get 412, not overwrite."""
    import json

    sim = await start_sim()
    both = [
        Backend(id="e", url=sim.urls[0], upstream="default"),
        Backend(id="n", url=NOWHERE, upstream="new"),
    ]
    url = await start_router(both, admin_token="s3cret")
    host, port = url.removeprefix("http://").split(":")
    slow_body = json.dumps({"weights": {"default": 90, "new": 10}}).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"PUT /admin/upstreams HTTP/1.1\r\nhost: r\r\nauthorization: Bearer s3cret\r\nif-match: 0\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(slow_body)
    )
    await writer.drain()
    await asyncio.sleep(0.1)  # the slow writer's head is in; its body is not
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as c:
        fast = await c.put(
            f"{url}/admin/upstreams", json={"weights": {"default": 50, "new": 50}}, headers={"if-match": "0"}
        )
        assert fast.status_code == 200
        writer.write(slow_body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        view = (await c.get(f"{url}/admin/upstreams")).json()
    assert b" 412 " in status_line
    assert view["version"] == 1 and view["weights"] == {"default": 50, "new": 50}


async def test_posting_an_existing_id_is_a_409_and_put_replaces_keeping_the_drain(
    start_router: Callable[..., Awaitable[str]],
) -> None:
    a = "http://127.0.0.1:9"
    url = await start_router([Backend(id=a, url=a, pool="short")], admin_token="s3cret")
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as c:

        async def listed() -> dict[str, Any]:
            rows = (await c.get(f"{url}/admin/backends")).json()["backends"]
            return {b["id"]: b for b in rows}

        assert (await c.post(f"{url}/admin/backends/{a}/drain", headers=JSON)).status_code == 200
        clash = await c.post(f"{url}/admin/backends", json={"url": a, "pool": "long"})
        assert clash.status_code == 409
        error = clash.json()["error"]
        assert error["type"] == "ConflictError" and error["code"] == 409
        assert f"PUT /admin/backends/{a}" in error["message"]
        assert (await listed())[a]["pool"] == "short" and (await listed())[a]["draining"] is True  # untouched
        put = await c.put(f"{url}/admin/backends/{a}", json={"url": a, "pool": "long", "weight": 2})
        assert put.status_code == 200 and put.json() == {"replaced": a, "draining": True}
        row = (await listed())[a]
        assert (row["pool"], row["weight"], row["draining"]) == ("long", 2.0, True)  # a drain is its own call
        # PUT of an unknown id adds it; the body may repeat the path's id, not contradict it.
        new = await c.put(f"{url}/admin/backends/b", json={"url": "http://127.0.0.1:10", "id": "b"})
        assert new.status_code == 201 and new.json() == {"added": "b"}
        other = await c.put(f"{url}/admin/backends/b", json={"url": "http://127.0.0.1:10", "id": "c"})
        assert other.status_code == 400 and other.json()["error"]["message"].startswith("id:")
        # /weight is still the weight route, for URL ids too.
        assert (await c.put(f"{url}/admin/backends/{a}/weight", json={"weight": 3})).status_code == 200
        assert set(await listed()) == {a, "b"} and (await listed())[a]["weight"] == 3.0


async def test_a_refused_put_leaves_the_backend_as_it_was(start_router) -> None:
    url = await start_router([Backend(id="b1", url="http://127.0.0.1:9")])
    async with httpx.AsyncClient(timeout=10) as c:
        bad = {"url": "http://127.0.0.1:10", "dp_rank": 1, "kv_events": "tcp://127.0.0.1"}
        r = await c.put(f"{url}/admin/backends/b1", json=bad)
        assert r.status_code == 400
        listed = {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}
    assert (listed["b1"]["url"], listed["b1"].get("dp_rank")) == ("http://127.0.0.1:9", None)


async def test_the_409_names_a_rank_id_escaped_for_a_url_path(start_router) -> None:
    url = await start_router([Backend(id="http://127.0.0.1:9#dp1", url="http://127.0.0.1:9", dp_rank=1)])
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(f"{url}/admin/backends", json={"url": "http://127.0.0.1:9", "dp_rank": 1})
    assert r.status_code == 409
    assert "PUT /admin/backends/http://127.0.0.1:9%23dp1 " in r.json()["error"]["message"]


async def test_kv_event_sources_follow_backend_ids_through_remove_and_put(start_router) -> None:
    url = await start_router([Backend(id="seed", url="http://127.0.0.1:9")])
    rank1 = {"url": "http://127.0.0.1:11", "dp_rank": 1, "kv_events": "tcp://127.0.0.1:5600"}

    async def followed(c: httpx.AsyncClient) -> dict[str, set[str]]:
        kv = (await c.get(f"{url}/admin/policy")).json()["kv_sources"]
        return {s["endpoint"]: set(s["backends"]) for s in kv}

    async with httpx.AsyncClient(timeout=10) as c:
        assert (await c.put(f"{url}/admin/backends/a", json=rank1)).status_code == 201
        assert (await followed(c))["tcp://127.0.0.1:5601"] == {"a"}
        assert (await c.delete(f"{url}/admin/backends/a", headers=JSON)).status_code == 200
        assert "tcp://127.0.0.1:5601" not in await followed(c)  # it credited nobody else: unsubscribed
        assert (await c.put(f"{url}/admin/backends/b", json=rank1)).status_code == 201
        assert (await followed(c))["tcp://127.0.0.1:5601"] == {"b"}  # not still the removed "a"
        moved = {**rank1, "kv_events": "tcp://127.0.0.1:5700"}
        assert (await c.put(f"{url}/admin/backends/b", json=moved)).status_code == 200
        now = await followed(c)
    assert now == {"tcp://127.0.0.1:5701": {"b"}}  # the old endpoint, crediting nobody, is not followed


async def test_a_tokenless_router_refuses_a_public_address_unless_told(start_router) -> None:
    from infctl.errors import ConfigError
    from infctl.router.config import RouterConfig
    from infctl.router.server import serve

    public = RouterConfig(backends=(Backend(id="a", url=NOWHERE),), host="0.0.0.0", port=0)
    with pytest.raises(ConfigError, match="refusing to start"):  # before it listens: nothing to stop
        async with asyncio.timeout(30):  # a router that started would serve until stopped
            await serve(public)
    # Told, it starts; a token needs no telling.
    await start_router([Backend(id="a", url=NOWHERE)], host="0.0.0.0", insecure_admin=True)
    await start_router([Backend(id="a", url=NOWHERE)], host="0.0.0.0", admin_token="s3cret")


async def test_a_web_page_cannot_write_to_a_tokenless_router(start_router) -> None:
    """What a page the operator opens can send without a preflight (a text/plain or form post, no-cors),
    what it sends with one (its own Origin), and DNS rebinding (its own name, resolved to 127.0.0.1)."""
    url = await start_router([Backend(id="a", url=NOWHERE)])
    host = url.removeprefix("http://")
    evil = json.dumps({"url": "http://attacker.example:8000"})
    async with httpx.AsyncClient(timeout=10) as c:
        plain = await c.post(f"{url}/admin/backends", content=evil, headers={"content-type": "text/plain"})
        form = await c.post(f"{url}/admin/backends", data={"url": "http://attacker.example:8000"})
        cross = await c.post(
            f"{url}/admin/backends", content=evil, headers={**JSON, "origin": "http://attacker.example"}
        )
        rebound = await c.post(
            f"{url}/admin/backends", content=evil, headers={**JSON, "host": "attacker.example:80"}
        )
        read = await c.get(f"{url}/admin/backends", headers={"host": "attacker.example:80"})
        drain = await c.post(f"{url}/admin/backends/a/drain")  # no body, no type: a no-cors fetch
        delete = await c.delete(f"{url}/admin/backends/a", headers={"origin": "null"})
        listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
        assert [(b["id"], b["draining"]) for b in listed] == [("a", False)]  # nothing changed
        own = await c.post(
            f"{url}/admin/backends", content=evil, headers={**JSON, "origin": f"http://{host}"}
        )
    assert (plain.status_code, form.status_code, drain.status_code) == (415, 415, 415)
    assert (cross.status_code, rebound.status_code, read.status_code, delete.status_code) == (403,) * 4
    assert plain.json()["error"]["type"] == "UnsupportedMediaTypeError"
    assert cross.json()["error"]["type"] == "PermissionDeniedError"
    assert own.status_code == 201  # the router's own origin (its own UI, a same-origin page) may write


async def test_upstream_writes_need_if_match_and_known_nonzero_weights(start_router) -> None:
    backends = [Backend(id="o", url=NOWHERE, upstream="old"), Backend(id="n", url=NOWHERE, upstream="new")]
    url = await start_router(
        backends, policy={"preset": "round_robin", "upstreams": {"mirror": {"to": "dark"}}}
    )
    async with httpx.AsyncClient(timeout=10) as c:
        got = await c.get(f"{url}/admin/upstreams")
        assert got.headers["etag"] == '"0"' and got.json()["version"] == 0
        blind = await c.put(f"{url}/admin/upstreams", json={"weights": {"old": 1}})
        assert blind.status_code == 428 and blind.json()["error"]["type"] == "PreconditionRequired"
        v0 = {"if-match": got.headers["etag"]}
        for weights in ({"old": 0, "new": 0}, {"nosuch": 1}, {"old": 1, "nosuch": 1}):
            r = await c.put(f"{url}/admin/upstreams", json={"weights": weights}, headers=v0)
            assert r.status_code == 400, weights
        r = await c.put(
            f"{url}/admin/upstreams", content=b'{"weights": {"old": 1e999}}', headers={**v0, **JSON}
        )
        assert r.status_code == 400
        view = (await c.get(f"{url}/admin/upstreams")).json()
        assert view["version"] == 0 and view["weights"] == {}  # nothing was written
        # Groups the config names are known before any backend has them.
        ok = await c.put(f"{url}/admin/upstreams", json={"weights": {"old": 9, "dark": 1}}, headers=v0)
        assert ok.status_code == 200 and ok.headers["etag"] == '"1"'
        again = await c.put(f"{url}/admin/upstreams", json={"weights": {"old": 1}}, headers=v0)
        assert again.status_code == 412
