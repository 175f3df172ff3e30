"""The daemon's small HTTP server: ``GET /metrics`` (Prometheus text) and ``GET /health``."""

from __future__ import annotations

from aiohttp import web

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.errors import ConfigError


class MetricsServer:
    def __init__(self, runner: web.AppRunner, url: str) -> None:
        self.runner, self.url = runner, url

    @classmethod
    async def start(cls, host: str, port: int, metrics: AutoscalerMetrics) -> MetricsServer:
        async def render(_: web.Request) -> web.Response:
            return web.Response(text=metrics.render(), content_type="text/plain", charset="utf-8")

        async def health(_: web.Request) -> web.Response:
            return web.json_response({"status": "ok", "dry_run": metrics.dry_run})

        app = web.Application()
        app.router.add_get("/metrics", render)
        app.router.add_get("/health", health)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise ConfigError(
                f"cannot listen on {host}:{port}: {err.strerror}", hint="choose another --port"
            ) from None
        bound = runner.addresses[0][1] if runner.addresses else port
        return cls(runner, f"http://{host}:{bound}")

    async def close(self) -> None:
        await self.runner.cleanup()
