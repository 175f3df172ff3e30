"""What a personality (vLLM or SGLang) decides, and the engine state it reads to decide it.

The driver and the HTTP layer are engine-neutral; a personality supplies the engine-specific parts:
metric names, labels and buckets; error bodies; extra endpoints; the PD wire protocol.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, ClassVar, Literal, Protocol

from aiohttp import web

from infctl.engines.base import COMPLETIONS_DEFAULT_MAX_TOKENS
from infctl.sim.faults import FaultState
from infctl.sim.settings import SimSettings
from infctl.sim.types import CoreStats
from infctl.telemetry.exposition import CONTENT_TYPE, Histogram
from infctl.tokenization import Tokenizer

HISTOGRAMS = (
    "ttft", "itl", "tpot", "e2e", "queue", "inference", "prefill", "decode",
    "prompt_tokens", "generation_tokens", "iteration_tokens", "max_tokens",
    "n", "max_generation_tokens", "num_preemptions", "prefill_kv_computed",
)  # fmt: skip
"""Neutral names of the histograms the driver observes; a personality renders those it has buckets for."""

_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}


def error_type(status: int) -> str:
    """vLLM-style error type for an HTTP status (``BadRequestError``, ``ServiceUnavailableError``...)."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return "Error"
    return phrase.title().replace(" ", "").replace("-", "") + "Error"


class SimHTTPError(Exception):
    """A request the engine refuses; the personality shapes the body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        err_type: str | None = None,
        generation: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.err_type = err_type or error_type(status)
        self.generation = generation
        """The generation failed (vLLM's ``GenerationError``), not the request's checks: a chat stream has
        had its role chunk before the error event (``routes._refuse``)."""


def compact_json(obj: Any) -> str:
    """JSON as FastAPI (vLLM, SGLang) writes it: no spaces, UTF-8 kept."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def json_response(body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer as FastAPI's ``JSONResponse`` sends it: ``application/json``, no charset."""
    head = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(body=compact_json(body).encode(), status=status, headers=head)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body, or a 400 shaped by the personality."""
    try:
        body = await request.json()
    except ValueError:
        raise SimHTTPError(400, "JSON decode error: the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise SimHTTPError(400, "Input should be a valid dictionary")
    return body


def int_field(body: Mapping[str, Any], key: str, minimum: int) -> int | None:
    """``body[key]`` as an integer of at least ``minimum`` (None when absent), or a 400."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SimHTTPError(400, f"{key} must be an integer", param=key)
    if value < minimum:
        raise SimHTTPError(400, f"{key} must be at least {minimum}, got {value}.", param=key)
    return value


@dataclass(frozen=True, slots=True)
class Capacity:
    """The profile values the HTTP surface reports."""

    block_size: int
    num_gpu_blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool


class EngineMetrics:
    """Request-level observations (simulated seconds / tokens); counters and gauges come from CoreStats."""

    def __init__(self, buckets: Mapping[str, Sequence[float]]) -> None:
        self.hist: dict[str, Histogram] = {k: Histogram(b) for k, b in buckets.items()}
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self._gen_samples: deque[tuple[float, int]] = deque(maxlen=64)

    def observe(self, key: str, value: float, n: int = 1) -> None:
        h = self.hist.get(key)
        if h is not None:
            h.observe(value, n)

    def finish(self, reason: str) -> None:
        self.finished[reason] = self.finished.get(reason, 0) + 1

    def sample_generation(self, now: float, generation_tokens: int) -> None:
        """Record (time, cumulative generated tokens) at most every 0.5 simulated seconds."""
        if not self._gen_samples or now - self._gen_samples[-1][0] >= 0.5:
            self._gen_samples.append((now, generation_tokens))

    def gen_throughput(self, now: float, generation_tokens: int, window: float = 5.0) -> float:
        """Generated tokens per simulated second over about the last ``window`` seconds."""
        base: tuple[float, int] | None = None
        for t, g in reversed(self._gen_samples):
            base = (t, g)
            if now - t >= window:
                break
        if base is None or now - base[0] <= 0:
            return 0.0
        return (generation_tokens - base[1]) / (now - base[0])


class BootstrapRegistry:
    """PD rendezvous between instances of one process: SGLang's by bootstrap port and ``bootstrap_room``,
    vLLM's NIXL side channels by port.

    A prefill instance registers its bootstrap port; a decode request whose ``bootstrap_port`` is one of
    them waits until the prefill of its room completes at *that* port (as SGLang's decode meets the prefill
    behind the bootstrap server the port names), instead of charging a modelled transfer. A room sent to
    another local prefill's port never completes there: the decode fails after ``pd_wait_timeout``.

    A vLLM prefill instance registers its NIXL side-channel port with its engine id (:attr:`side_channels`);
    a decode whose ``remote_port`` names one of them must name that engine (``remote_engine_id``), as vLLM's
    handshake requires.
    """

    def __init__(self) -> None:
        self.local_ports: set[int] = set()
        self.side_channels: dict[int, str | None] = {}
        """vLLM NIXL: side-channel port -> engine id of the instance of this process listening there (None:
        it crashed)."""
        self._rooms: dict[tuple[int, int], asyncio.Future[bool]] = {}
        self.waiting = 0

    def _future(self, key: tuple[int, int]) -> asyncio.Future[bool]:
        fut = self._rooms.get(key)
        if fut is None:
            fut = self._rooms[key] = asyncio.get_running_loop().create_future()
        return fut

    def complete(self, port: int, room: int, ok: bool) -> None:
        """The prefill of ``room`` behind bootstrap ``port`` ended (``ok``: its KV is ready)."""
        key = (port, room)
        fut = self._future(key)
        if not fut.done():
            fut.set_result(ok)
        # Nobody may ever wait for it (decode went elsewhere): forget it after a while.
        asyncio.get_running_loop().call_later(60.0, self._rooms.pop, key, None)

    async def wait(self, port: int, room: int, limit: float) -> bool:
        """True when the room's prefill behind bootstrap ``port`` succeeded; False on failure or after
        ``limit`` wall seconds."""
        key = (port, room)
        fut = self._future(key)
        self.waiting += 1
        try:
            async with asyncio.timeout(limit):
                return await asyncio.shield(fut)
        except TimeoutError:
            return False
        finally:
            self.waiting -= 1
            if fut.done():
                self._rooms.pop(key, None)


class EngineView(Protocol):
    """What a personality reads from its instance."""

    @property
    def model(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def engine_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def settings(self) -> SimSettings: ...
    @property
    def capacity(self) -> Capacity: ...
    @property
    def tokenizer(self) -> Tokenizer:
        """What prompts are tokenized with (``SimSettings.tokenizer``)."""

    @property
    def metrics(self) -> EngineMetrics: ...
    @property
    def faults(self) -> FaultState: ...
    @property
    def registry(self) -> BootstrapRegistry: ...
    @property
    def server_load(self) -> int:
        """Generation requests in flight on this instance (vLLM ``/load``)."""

    @property
    def pd_waiting(self) -> int:
        """Decode requests waiting for their KV (SGLang transfer queue)."""

    def stats(self) -> CoreStats: ...
    def now(self) -> float: ...
    def gen_throughput(self) -> float: ...
    def reset_cache(self) -> bool: ...
    async def probe(self) -> bool:
        """Generate one token end to end (SGLang ``/health_generate``)."""


@dataclass(slots=True)
class PDPlan:
    """How one request takes part in prefill/decode disaggregation."""

    max_tokens: int | None = None
    """Forced max_tokens (a prefill leg generates one token)."""
    remote_prefill: bool = False
    """The prompt's KV comes from another engine (the core charges transfer time)."""
    room: int | None = None
    """SGLang bootstrap room."""
    bootstrap_port: int | None = None
    """SGLang: the bootstrap port the room meets at (a prefill leg's own, a decode's ``bootstrap_port``)."""
    prefill_leg: bool = False
    wait_local: bool = False
    """SGLang decode: wait for the room's prefill on an instance of this process first."""
    refusal: SimHTTPError | None = None
    """The engine accepts the request, then aborts it before any token (SGLang: a PD engine given no
    ``bootstrap_room``): a non-streaming request is answered with this error, a streaming one with status
    200 and this error as the stream's only event."""
    extras: dict[str, Any] = field(default_factory=dict)


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
