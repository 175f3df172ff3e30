"""A router serves as soon as it listens: its first scrape, first health probe and Kubernetes discovery run
beside the requests, never ahead of them; and a router process never imports what it does not use to serve
(the renderer, Jinja2, ZeroMQ, the Kubernetes client), which was most of its exec-to-serving time."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from infctl.errors import KubeError
from infctl.router.discovery import DiscoverySettings
from infctl.router.snapshot import Backend

COMPLETION = {"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": " w"}]}


class HeldEngine:
    """An engine that answers completions at once and holds every GET (its /metrics and /health) until
    :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.held: list[str] = []
        self.answered_gets = 0

    async def get(self, request: web.Request) -> web.Response:
        self.held.append(request.path)
        await self.release.wait()
        self.answered_gets += 1
        return web.Response(text="", content_type="text/plain")

    async def completions(self, request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(COMPLETION)


@pytest.fixture
async def held_engine() -> AsyncIterator[tuple[HeldEngine, str]]:
    engine = HeldEngine()
    app = web.Application()
    app.router.add_post("/v1/completions", engine.completions)
    app.router.add_get("/{tail:.*}", engine.get)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield engine, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        engine.release.set()
        await runner.cleanup()


class SlowApiServer:
    """A ``kube_connect`` that does not return until :attr:`answer` is set (or 10 s pass), then fails as an
    unreachable API server does."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.answer = threading.Event()
        self.returned = threading.Event()

    def __call__(self) -> Any:
        self.entered.set()
        self.answer.wait(10)
        self.returned.set()
        raise KubeError("connection refused", hint="is the API server up?")


async def until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.005)


async def test_router_serves_while_first_scrape_probe_and_discovery_are_outstanding(
    start_router: Any, held_engine: tuple[HeldEngine, str]
) -> None:
    engine, engine_url = held_engine
    api = SlowApiServer()
    discovery = DiscoverySettings(namespace="llm", selector="infctl.io/release=r")
    url = await start_router([Backend(id="e0", url=engine_url)], discovery=discovery, kube_connect=api)
    try:
        # The router's first scrape and probe have reached the engine, which holds them, and discovery is
        # inside its client's construction: every optional start-up step is outstanding.
        await until(lambda: {"/metrics", "/health"} <= set(engine.held) and api.entered.is_set())
        async with httpx.AsyncClient(timeout=30) as c:
            health = await c.get(f"{url}/health")
            answer = await c.post(f"{url}/v1/completions", json={"model": "m", "prompt": "hi"})
        assert not api.returned.is_set()
        assert engine.answered_gets == 0
        assert health.status_code == 200
        assert answer.status_code == 200 and answer.json()["choices"][0]["text"] == " w"
    finally:
        api.answer.set()
        engine.release.set()


DRIVER = """
import atexit, json, runpy, sys
out, argv = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["infctl", *argv]
runpy.run_module("infctl", run_name="__main__")
"""
NOT_TO_SERVE = (
    "jinja2",  # the renderer's templates; a router loads it only for a model's chat template
    "zmq",  # KV events, when an engine publishes them
    "kubernetes",  # discovery, when configured
    "infctl.kube",
    "infctl.manifests.render",
    "infctl.config.deployment",  # profiles: the router reads only its own file's model
    "infctl.config.cluster",
    "prometheus_client",
    "tokenizers",  # a model's tokenizer, when one is named
    "yaml",  # a router file (-f), when one is given
    "rich",  # tables and error lines; the start-up line is plain
)


def test_router_process_loads_only_what_it_serves_with(tmp_path: Path) -> None:
    """``python -m infctl router`` as the local target starts it, until it has routed a completion and exited
    on SIGTERM: none of the optional packages was ever imported."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = _engine_thread()
    out = tmp_path / "modules.json"
    argv = ["router", "--host", "127.0.0.1", "--port", str(port), "--tokenizer", "words"]
    argv += ["--backend", f"{engine},role=both"]
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(out), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        answer = _first_completion(f"http://127.0.0.1:{port}", proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert answer == 200, err.decode()
    loaded = set(json.loads(out.read_text()))
    assert sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_TO_SERVE)) == []
    assert "infctl.router.server" in loaded  # it did run the router


def _engine_thread() -> str:
    """A plain engine on a thread: completions answered, GETs answered empty."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = json.dumps(COMPLETION).encode()

    class Engine(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer(b"")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer(body)

        def _answer(self, content: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _first_completion(url: str, proc: subprocess.Popen[bytes]) -> int:
    """The status of the first completion the router answers (retrying while it is not yet listening)."""
    with httpx.Client(timeout=30) as c:
        while proc.poll() is None:
            try:
                return c.post(f"{url}/v1/completions", json={"model": "m", "prompt": "hi"}).status_code
            except httpx.ConnectError:
                threading.Event().wait(0.02)
    return -1
