"""The vLLM personality (0.32, V1 engine): error bodies, checks, extra endpoints, NIXL-style PD; its
``/metrics`` is ``vllm_metrics``, its ``/tokenize`` ``vllm_tokenize``.

PD follows vLLM's two-step connector protocol: a prefill leg carries ``kv_transfer_params`` with
``do_remote_decode: true`` and generates one token; its response returns filled-in params
(``do_remote_prefill: true``, ``remote_engine_id``, ``remote_block_ids``, ``remote_host``,
``remote_port`` = the NIXL side-channel port, ``--nixl-side-channel-port`` (vLLM's
``VLLM_NIXL_SIDE_CHANNEL_PORT``, default 5600) + instance index), which the decode leg sends back
unchanged; a request with ``do_remote_prefill: true`` is decoded with the prompt's KV "transferred"
(the core charges transfer time instead of prefill). When ``remote_host:remote_port`` is the side channel
of a prefill instance of this process, the decode first checks it is ``remote_engine_id``'s, as vLLM's NIXL
handshake does: a decode sent another engine's port fails (HTTP 500, vLLM's default
``kv_load_failure_policy`` ``fail``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from aiohttp import web

from infctl.engines import versions
from infctl.engines import vllm as names
from infctl.engines.base import COMPLETIONS_DEFAULT_MAX_TOKENS
from infctl.sim import prompt_tokens
from infctl.sim.personality import vllm_checks as checks
from infctl.sim.personality import vllm_metrics as metrics
from infctl.sim.personality.base import DPBalance, Personality
from infctl.sim.personality.engine_view import EngineView
from infctl.sim.personality.http_json import SimHTTPError, json_response
from infctl.sim.personality.pd import PDPlan
from infctl.sim.personality.vllm_tokenize import TokenizeRoutes
from infctl.telemetry.exposition import CONTENT_TYPE, label_pairs

VERSION = versions.release(names.ADAPTER.default_image)
"""What ``/version`` answers: the release infctl pins and its slow stage proves (``vllm_launch.IMAGE``;
vLLM 0.32's CPU build answers ``{"version":"0.32.0"}``)."""


class VllmPersonality(Personality):
    name: ClassVar[str] = "vllm"
    owned_by: ClassVar[str] = "vllm"
    dp_balance: ClassVar[DPBalance] = "least_loaded"
    # vLLM 0.32's prometheus_client writes text format 1.0.0 (seen on the CPU build).
    metrics_content_type: ClassVar[str] = "text/plain; version=1.0.0; charset=utf-8"
    parallel_sampling: ClassVar[bool] = True
    request_chat_template: ClassVar[bool] = True
    reasoning_effort_template: ClassVar[bool] = True

    def __init__(self, engine: EngineView, dp_rank: int | None = None) -> None:
        super().__init__(engine, dp_rank)
        # One engine core is engine "0"; with data parallelism every series is per engine core.
        self._engine_label = str(dp_rank or 0)
        self._labels = label_pairs(
            {names.MODEL_NAME_LABEL: engine.model, names.ENGINE_LABEL: self._engine_label}
        )
        self._tokenize_routes = TokenizeRoutes(engine, self.accepts_model)
        self._cache_info = label_pairs(
            metrics.cache_config_info(engine.capacity, engine.settings, self._engine_label)
        )
        self._largest_id = prompt_tokens.largest_token_id(engine.tokenizer)

    def buckets(self) -> dict[str, tuple[float, ...]]:
        return metrics.buckets(self.engine.capacity.max_model_len)

    def echoes_request_id(self) -> bool:
        # vLLM 0.32 adds XRequestIdMiddleware only with --enable-request-id-headers
        # (entrypoints/serve/middleware/register.py); without it no answer carries x-request-id.
        return self.engine.settings.enable_request_id_headers

    def metrics_content_type_for(self, method: str) -> str:
        # vLLM 0.32 serves GET /metrics from the instrumentator's route (text format 1.0.0) and every other
        # method from the prometheus_client ASGI app mounted behind it (0.0.4): seen on the CPU build.
        return self.metrics_content_type if method == "GET" else CONTENT_TYPE

    def render_metrics(self) -> str:
        return metrics.render(self.engine, self._labels, self._cache_info, self._bucket_cache)

    def error_body(self, err: SimHTTPError) -> dict[str, Any]:
        return {
            "error": {"message": err.message, "type": err.err_type, "param": err.param, "code": err.status}
        }

    async def read_generation(self, request: web.Request, *, chat: bool) -> dict[str, Any]:
        checks.check_media_type(request.headers.get("Content-Type"))
        return checks.validate(checks.decode(await request.read()), chat=chat)

    def check_generation(self, body: Mapping[str, Any], *, chat: bool) -> None:
        # vLLM 0.32: the request's own template is refused (render_chat) before the budget is read
        # (preprocess_chat's build_tok_params).
        if chat:
            checks.check_chat_template(body, trusted=self.engine.settings.trust_request_chat_template)
        checks.check_budget(body, self.engine.capacity.max_model_len, chat=chat)
        checks.check_sampling(body, chat=chat)

    def prompt_ids_refusal(self, prompts: Sequence[Sequence[int]]) -> SimHTTPError | None:
        # vLLM 0.32 bounds ids in its engine's input processor (renderers/base.py validate_token_ids), after
        # the serving layer's checks: a non-streamed request gets the 400, a stream a 200 whose only event is
        # this error (both seen on the CPU build). Without the model's tokenizer no bound is known.
        limit = self._largest_id
        if limit is None:
            return None
        for ids in prompts:
            top = max(ids)
            if top > limit:
                return SimHTTPError(400, f"Token id {top} is out of vocabulary")
        return None

    def max_tokens(self, body: Mapping[str, Any], prompt_tokens: int, *, chat: bool) -> int:
        # A chat without max_tokens: the rest of the context in vLLM, capped by --max-default-tokens here.
        default = self.engine.settings.max_default_tokens if chat else COMPLETIONS_DEFAULT_MAX_TOKENS
        limit = self.engine.capacity.max_model_len
        return checks.max_tokens(body, prompt_tokens, limit, default, chat)

    def accepts_model(self, name: object) -> bool:
        # ``OpenAIServing._is_model_supported``: no name (or an empty one) is the served model.
        return not name or name == self.engine.model

    def unknown_model(self, name: object) -> SimHTTPError:
        return SimHTTPError(
            404, f"The model `{name}` does not exist. Valid aliases: {self.engine.model}.", param="model"
        )

    def pd_plan(self, body: Mapping[str, Any], prompt_tokens: int, request_id: str) -> PDPlan:
        params = body.get("kv_transfer_params")
        if params is None:
            return PDPlan()
        if not isinstance(params, dict):
            raise SimHTTPError(400, "kv_transfer_params must be an object", param="kv_transfer_params")
        if params.get("do_remote_decode"):
            return PDPlan(max_tokens=1, prefill_leg=True)
        if params.get("do_remote_prefill"):
            return PDPlan(remote_prefill=True, refusal=self._handshake(params))
        return PDPlan()

    def _handshake(self, params: Mapping[str, Any]) -> SimHTTPError | None:
        """vLLM's decode handshakes with the NIXL listener at ``remote_host:remote_port`` and requires the
        engine there to be ``remote_engine_id``; the simulator knows the listeners of this process only.
        A failed load ends the accepted request with an error (``kv_load_failure_policy`` ``fail``): 500,
        or a stream's error event."""
        e = self.engine
        host, port = params.get("remote_host"), params.get("remote_port")
        wanted = params.get("remote_engine_id")
        if host != e.host or not isinstance(port, int) or port not in e.registry.side_channels:
            return None
        found = e.registry.side_channels[port]
        if found is None:
            # vLLM's GenerationError for a KV load that failed (the prefill engine died after answering).
            return SimHTTPError(500, "Internal server error", generation=True)
        if found != wanted:
            return SimHTTPError(
                500,
                f"KV transfer failed: remote NIXL agent engine ID mismatch at {host}:{port}: expected "
                f"{wanted}, received {found}.",
            )
        return None

    def on_start(self) -> None:
        # A decode binds its own listener too, but only a prefill's is ever named in a remote_port.
        if self.engine.role == "prefill":
            self.engine.registry.side_channels[self.side_channel_port] = self.engine.engine_id

    def on_crash(self) -> None:
        # The KV it held for decodes dies with it: a decode that names its side channel cannot load it.
        if self.engine.role == "prefill":
            self.engine.registry.side_channels[self.side_channel_port] = None

    @property
    def side_channel_port(self) -> int:
        """This instance's NIXL side-channel port (``--nixl-side-channel-port`` + index; reported, never
        bound)."""
        return self.engine.settings.nixl_side_channel_port + self.engine.index

    def pinned_rank(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> int | None:
        """The ``x-data-parallel-rank`` header; a value that is not an integer is ignored, as vLLM does."""
        raw = headers.get(names.DP_RANK_HEADER)
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    def dp_routes(self, ranks: Sequence[Personality]) -> list[web.RouteDef]:
        async def load(request: web.Request) -> web.Response:
            return json_response({"server_load": sum(r.engine.server_load for r in ranks)})

        shared = [web.get("/load", load)]
        if self.engine.settings.server_dev_mode:

            async def reset_prefix_cache(request: web.Request) -> web.Response:
                # vLLM 0.32 resets every engine core; success only when all did (AsyncMPClient).
                done = [r.engine.reset_cache() for r in ranks]
                return json_response({"success": all(done)})

            shared.append(web.post("/reset_prefix_cache", reset_prefix_cache))
        return shared

    def response_extras(self, plan: PDPlan, prompt_tokens: int) -> dict[str, Any]:
        if not plan.prefill_leg:
            return {"kv_transfer_params": None}
        e = self.engine
        n_blocks = math.ceil(prompt_tokens / e.capacity.block_size)
        return {
            "kv_transfer_params": {
                "do_remote_prefill": True, "do_remote_decode": False,
                "remote_block_ids": list(range(n_blocks)), "remote_engine_id": e.engine_id,
                "remote_host": e.host, "remote_port": self.side_channel_port, "tp_size": 1,
            }
        }  # fmt: skip

    def routes(self) -> list[web.RouteDef]:
        return [
            *self._tokenize_routes.routes(),
            web.get("/load", self._load),
            web.get("/version", self._version),
            web.get("/ping", self._ping),
            web.post("/ping", self._ping),
            *(self._dev_routes() if self.engine.settings.server_dev_mode else ()),
        ]

    def _dev_routes(self) -> list[web.RouteDef]:
        """What vLLM 0.32 serves only under ``VLLM_SERVER_DEV_MODE=1`` (``names.DEV_MODE_ENV``), of what
        the simulator imitates; without it, 404."""
        return [
            web.get("/is_sleeping", self._is_sleeping),
            web.post("/reset_prefix_cache", self._reset_prefix_cache),
        ]

    async def _load(self, request: web.Request) -> web.Response:
        return json_response({"server_load": self.engine.server_load})

    async def _version(self, request: web.Request) -> web.Response:
        return json_response({"version": VERSION})

    async def _ping(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self.engine.faults.plan.health_fail else 200)

    async def _is_sleeping(self, request: web.Request) -> web.Response:
        return json_response({"is_sleeping": False})

    async def _reset_prefix_cache(self, request: web.Request) -> web.Response:
        # vLLM 0.32 answers 200 either way: false while requests hold blocks (serve/dev/cache/api_router.py).
        return json_response({"success": self.engine.reset_cache()})


__all__ = ["VllmPersonality"]
