"""The router's aiohttp application: the generation routes (handed to ``proxy.generate``), the admin API,
and the small read-only endpoints: ``/v1/models`` (the union of the backends', asked live), ``/health``,
``/ready`` and ``/metrics``; wrong methods and unknown paths answer in the OpenAI error shape.

The lean front (``infctl.router.front``) serves the generation POSTs itself and splices every other
request's connection to this application, listening on a private Unix socket (``infctl.router.splice``);
with the aiohttp front it serves everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from infctl.router import admin
from infctl.router.parse_errors import coding_refusal
from infctl.router.proxy import generate
from infctl.router.requests import BadRequest, error_response, parse_body, read_request_info
from infctl.telemetry.scrape import NoAnswer

if TYPE_CHECKING:
    from infctl.router.state import RouterState

STATE: web.AppKey[RouterState] = web.AppKey("router_state")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(state: RouterState) -> web.Application:
    app = web.Application(client_max_size=state.cfg.max_body_bytes)
    app[STATE] = state

    def route(path: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            if (refused := coding_refusal(request)) is not None:
                return refused
            return await generate(state, request, path=path)

        return handler

    app.router.add_post("/v1/completions", route("/v1/completions"))
    app.router.add_post("/v1/chat/completions", route("/v1/chat/completions"))
    app.router.add_get("/v1/models", _coded(_models))
    app.router.add_get("/health", _coded(_health))
    app.router.add_get("/ready", _coded(_ready))
    app.router.add_get("/metrics", _coded(_metrics))
    app.router.add_post("/tokenize", _coded(_tokenize))
    admin.add_routes(app, state)  # its handlers check transfer codings too
    # Wrong method or unknown path: the OpenAI error shape like every other router answer. Catch-all routes
    # rather than a middleware, which would sit in front of every generation request.
    for path in ("/v1/completions", "/v1/chat/completions"):
        app.router.add_route("*", path, _coded(_method_not_allowed))
    app.router.add_route("*", "/{tail:.*}", _coded(_not_found))

    async def close_when_handing_over(_request: web.Request, response: web.StreamResponse) -> None:
        # A successor listens: every answer closes its connection, so the client's next request goes there.
        # A keep-alive client polling /ready or /metrics (a supervisor, Prometheus) otherwise held a router
        # handing over until its drain timeout (~30 s).
        if state.handing_over:
            response.force_close()

    app.on_response_prepare.append(close_when_handing_over)
    return app


def _coded(handler: Handler) -> Handler:
    """``handler`` behind the transfer-coding check every route makes (``parse_errors.coding_refusal``)."""

    async def checked(request: web.Request) -> web.StreamResponse:
        return coding_refusal(request) or await handler(request)

    return checked


async def _method_not_allowed(request: web.Request) -> web.Response:
    resp = error_response(405, f"{request.method} {request.path}: use POST", kind="MethodNotAllowedError")
    resp.headers["allow"] = "POST"
    return resp


async def _not_found(request: web.Request) -> web.Response:
    return error_response(404, f"{request.method} {request.path}: no such route", kind="NotFoundError")


async def _models(request: web.Request) -> web.Response:
    """Union of the models every routable backend serves (asked live, so it is never stale)."""
    state = request.app[STATE]
    urls = sorted({state.pool.backend(b).url for b in state.pool.ids()})
    seen: dict[str, dict[str, object]] = {}

    async def one(url: str) -> None:
        with contextlib.suppress(NoAnswer, ValueError):
            _, body = await state.scraper(url + "/v1/models")
            listed = json.loads(body)
            for m in listed.get("data", []) if isinstance(listed, dict) else ():
                if isinstance(m, dict) and "id" in m:
                    seen.setdefault(str(m["id"]), m)

    await asyncio.gather(*(one(u) for u in urls))
    return web.json_response({"object": "list", "data": list(seen.values())})


async def _tokenize(request: web.Request) -> web.Response:
    """The prompt's tokens as this router counts them, in vLLM's ``/tokenize`` shape (``prompt`` or
    ``messages``), plus which tokenizer and whether it is exact: what ``doctor`` compares with the engines."""
    state = request.app[STATE]
    try:
        body = parse_body(await request.read())
        chat = "messages" in body
        info = await read_request_info(
            body,
            chat=chat,
            loop=asyncio.get_running_loop(),
            request_id="tokenize",
            headers={},
            block_size=state.cfg.block_size,
            session_header=state.cfg.session_header,
            tokenizer=state.tokenizer,
            hashes=False,
            max_prompt_chars=state.cfg.max_prompt_chars,
            own_template=state.cfg.trust_request_chat_template,
        )
    except BadRequest as exc:
        return error_response(exc.status, str(exc))
    tok = state.tokenizer
    return web.json_response({"count": info.prompt_tokens, "tokenizer": tok.name, "exact": tok.exact})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _ready(request: web.Request) -> web.Response:
    """Ready when not draining and at least one backend is in rotation."""
    state = request.app[STATE]
    routable = [b for b in state.pool.snapshot(0.0).backends if b.routable]
    if state.draining or not routable:
        return web.json_response({"ready": False, "routable": len(routable)}, status=503)
    return web.json_response({"ready": True, "routable": len(routable)})


async def _metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    inflight = ((b, state.pool.inflight(b)) for b in state.pool.ids())
    snap = state.pool.snapshot(asyncio.get_running_loop().time())
    engines = ((bid, st.signals) for bid, st in snap.states.items())
    text = state.metrics.render(
        inflight,
        state.policy_name,
        state.kv_stats,
        state.admission.waiting,
        engines=engines,
        pools_waiting=state.admission.waiting_by_pool().items(),
    )
    return web.Response(text=text, content_type="text/plain", charset="utf-8")
