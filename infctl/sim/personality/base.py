"""What a personality (vLLM or SGLang) decides.

The driver and the HTTP layer are engine-neutral; a personality supplies the engine-specific parts:
metric names, labels and buckets; error bodies; extra endpoints; the PD wire protocol. What it reads of its
instance is in ``engine_view``, the PD plan and rendezvous in ``pd``, JSON bodies and refusals in
``http_json``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from aiohttp import web

from infctl.engines.base import COMPLETIONS_DEFAULT_MAX_TOKENS
from infctl.sim.personality.engine_view import EngineView
from infctl.sim.personality.http_json import SimHTTPError, int_field, read_json_object
from infctl.sim.personality.pd import PDPlan
from infctl.telemetry.exposition import CONTENT_TYPE

HISTOGRAMS = (
    "ttft", "itl", "tpot", "e2e", "queue", "inference", "prefill", "decode",
    "prompt_tokens", "generation_tokens", "iteration_tokens", "max_tokens",
    "n", "max_generation_tokens", "num_preemptions", "prefill_kv_computed",
)  # fmt: skip
"""Neutral names of the histograms the driver observes; a personality renders those it has buckets for."""

DPBalance = Literal["least_loaded", "round_robin"]
"""How a data-parallel engine places a request that names no rank: vLLM's API server picks the rank with
the least ``4 * waiting + running``; SGLang's ``DataParallelController`` defaults to round robin."""


class Personality(ABC):
    """Engine-specific behaviour of one instance (or of one rank of a data-parallel engine)."""

    name: ClassVar[str]
    owned_by: ClassVar[str]
    dp_balance: ClassVar[DPBalance]
    metrics_content_type: ClassVar[str] = CONTENT_TYPE
    """The ``/metrics`` answer's Content-Type (the engine's prometheus_client's)."""
    parallel_sampling: ClassVar[bool] = False
    """Serves ``n`` > 1 and batches of prompts (``infctl.sim.samples``); False: refused with a 400."""
    request_chat_template: ClassVar[bool] = False
    """Whether a chat request's own ``chat_template`` is rendered (vLLM, which refuses it unless started
    with ``--trust-request-chat-template``: ``check_generation``); False: the model's template is, as
    SGLang's (0.5.23's ChatCompletionRequest has no such field)."""
    reasoning_effort_template: ClassVar[bool] = False
    """Whether a chat request's ``reasoning_effort`` reaches the chat template (vLLM's chat route, with the
    ``enable_thinking`` it implies: ``tokenization.chat.template_kwargs``)."""
    dp_pd_roles: ClassVar[bool] = False
    """Whether a data-parallel engine of this personality takes a PD role (``infctl.sim.dp``), its
    requests placed by :meth:`room_rank`."""

    def __init__(self, engine: EngineView, dp_rank: int | None = None) -> None:
        self.engine = engine
        self.dp_rank = dp_rank
        """The data-parallel rank this personality renders (its metric labels, its load entry); None: the
        engine is not data-parallel."""
        self._bucket_cache: dict[tuple[str, str, tuple[float, ...]], list[str]] = {}
        """Rendered histogram bucket lines, reused across scrapes (``telemetry.exposition.Writer``)."""

    @abstractmethod
    def buckets(self) -> dict[str, tuple[float, ...]]:
        """Histogram bounds by neutral name (see HISTOGRAMS); names left out are not recorded."""

    @abstractmethod
    def render_metrics(self) -> str:
        """The full /metrics body."""

    @abstractmethod
    def error_body(self, err: SimHTTPError) -> dict[str, Any]:
        """The JSON body of an error response."""

    def stream_error_body(self, err: SimHTTPError) -> dict[str, Any]:
        """The JSON of the SSE event that carries an error inside a stream already answered with 200."""
        return self.error_body(err)

    def echoes_request_id(self) -> bool:
        """Whether every answer carries ``x-request-id`` (the client's, else a new one). True here: the
        simulator always has for SGLang (not checked against SGLang's source); vLLM only with its flag."""
        return True

    def metrics_content_type_for(self, method: str) -> str:
        """The Content-Type of ``/metrics`` asked with ``method``: both engines mount prometheus_client's app
        there, which answers every method (HEAD and POST included)."""
        return self.metrics_content_type

    @abstractmethod
    def routes(self) -> list[web.RouteDef]:
        """Engine-specific endpoints."""

    @abstractmethod
    def pd_plan(self, body: Mapping[str, Any], prompt_tokens: int, request_id: str) -> PDPlan:
        """Read the PD fields of a request body (raises SimHTTPError when they are wrong)."""

    @abstractmethod
    def pinned_rank(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> int | None:
        """The data-parallel rank a request asks for, read the way the engine reads it; None: the engine's
        own balancing places it (raises SimHTTPError when the pin is malformed)."""

    def room_rank(self, body: Mapping[str, Any], ranks: int) -> int | None:
        """The rank of ``ranks`` a PD request must run on, whatever it is pinned to; None: no such rule."""
        return None

    def room_conflict(self, body: Mapping[str, Any], rank: int, ranks: int) -> SimHTTPError:
        """The error of a request pinned to ``rank`` while :meth:`room_rank` says another."""
        return SimHTTPError(500, f"data-parallel rank {rank} is not this request's")

    def dp_routes(self, ranks: Sequence[Personality]) -> list[web.RouteDef]:
        """Endpoints a data-parallel engine answers for all of ``ranks`` at once (its load reports); they
        replace the single-rank routes on the same paths."""
        return []

    async def read_generation(self, request: web.Request, *, chat: bool) -> dict[str, Any]:
        """A generation request's body as the engine's request model reads it (its 400s come before the
        model name is looked at)."""
        return await read_json_object(request)

    def check_generation(self, body: Mapping[str, Any], *, chat: bool) -> None:  # noqa: B027 - optional
        """The engine's refusals of a request whose model it serves, before the prompt is tokenized."""

    def prompt_ids_refusal(self, prompts: Sequence[Sequence[int]]) -> SimHTTPError | None:
        """The engine's refusal of a request's prompt token ids, made after it accepted the request (a
        stream has had its 200); None: served."""
        return None

    def max_tokens(self, body: Mapping[str, Any], prompt_tokens: int, *, chat: bool) -> int:
        """How many tokens the request may generate, or the engine's 400: here a request whose prompt and
        ``max_tokens`` do not fit in the context is refused (a chat without ``max_tokens`` gets the rest of
        the context, up to ``--max-default-tokens``)."""
        requested = int_field(body, "max_completion_tokens", 1) if chat else None
        if requested is None:
            requested = int_field(body, "max_tokens", 1)
        limit = self.engine.capacity.max_model_len
        if requested is None:
            if not chat:
                requested = COMPLETIONS_DEFAULT_MAX_TOKENS
            elif prompt_tokens >= limit:
                raise SimHTTPError(400, self.too_long(prompt_tokens, None))
            else:
                requested = min(self.engine.settings.max_default_tokens, limit - prompt_tokens)
        if prompt_tokens + requested > limit:
            raise SimHTTPError(400, self.too_long(prompt_tokens, requested))
        return requested

    def accepts_model(self, name: object) -> bool:
        return name is None or name == self.engine.model

    def unknown_model(self, name: object) -> SimHTTPError:
        """The 404 for a model this engine does not serve."""
        return SimHTTPError(404, f"The model `{name}` does not exist.", param="model")

    def too_long(self, prompt_tokens: int, max_tokens: int | None) -> str:
        limit = self.engine.capacity.max_model_len
        if max_tokens is None:
            return (
                f"This model's maximum context length is {limit} tokens. However, your request has "
                f"{prompt_tokens} input tokens. Please reduce the length of the input messages."
            )
        return (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion."
        )

    def on_start(self) -> None:  # noqa: B027 - optional hook
        """Called when the instance starts serving: join the process's PD rendezvous (``engine.registry``)."""

    def on_crash(self) -> None:  # noqa: B027 - optional hook
        """Called when the instance crashes (the ``crash-after`` fault)."""

    def pd_finished(self, plan: PDPlan, ok: bool) -> None:  # noqa: B027 - optional hook
        """Called when a request's prefill completed (ok) or failed."""

    def response_extras(self, plan: PDPlan, prompt_tokens: int) -> dict[str, Any]:
        """Top-level fields added to a non-streaming response (vLLM ``kv_transfer_params``)."""
        return {}

    def model_card(self, created: int) -> dict[str, Any]:
        m = self.engine.model
        return {
            "id": m, "object": "model", "created": created, "owned_by": self.owned_by,
            "root": m, "parent": None, "max_model_len": self.engine.capacity.max_model_len,
        }  # fmt: skip
