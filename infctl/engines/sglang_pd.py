"""SGLang's PD wire protocol: the bootstrap rendezvous of a disaggregated request (parallel style).

The router sends the same body to a prefill and a decode engine at once, plus ``bootstrap_host`` and
``bootstrap_port`` (the prefill's bootstrap server, :data:`DEFAULT_BOOTSTRAP_PORT` unless the profile says)
and one ``bootstrap_room`` (:func:`~infctl.engines.base.new_bootstrap_room`), where the two meet and the KV
moves. A PD engine refuses a request without a room (:data:`NO_BOOTSTRAP_ROOM`).
:class:`~infctl.engines.sglang.SGLangAdapter` delegates to it.

A PD prefill engine's data-parallel rank is the room's: it serves each request on rank
``bootstrap_room % n`` for its n ranks and its decode engines fetch the KV there, so a prefill leg pinned to
rank r needs a room with that remainder (``new_bootstrap_room(rank=r, ranks=n)``). n is what the engine
was started with (:func:`~infctl.engines.sglang_launch.dp_ranks`), and ``/server_info`` reports it
(:func:`reported_dp_ranks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infctl.engines.base import Body, PDEndpoint

DEFAULT_BOOTSTRAP_PORT = 8998
"""``--disaggregation-bootstrap-port``'s default (0.5.15, 0.5.23)."""

NO_BOOTSTRAP_ROOM = "Invalid request: Disaggregated request received without bootstrap room id."
"""How a PD engine (``--disaggregation-mode prefill|decode``) refuses a request without ``bootstrap_room``:
``Scheduler.handle_generate_request`` aborts it with this message, then `` req.rid='<id>'``, and status 400
(``prepare_abort(..., status_code=HTTPStatus.BAD_REQUEST)``); the OpenAI routes answer it as a
``BadRequestError`` (non-streaming: HTTP 400; streaming: an SSE ``error`` event). Only the ``fake``
transfer backend accepts such requests."""


def prefill_body(body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None) -> Body:
    """The client's body plus the bootstrap rendezvous; the decode leg gets the very same body.

    A completion batch takes a list of rooms, one per prompt, and the host and port as lists as long, as
    SGLang's own router sends them (sgl-model-gateway ``routers/http/pd_router.rs``,
    ``inject_bootstrap_into_value``; ``mini_lb.py`` on ``/generate``): ``GenerateReqInput`` gives prompt i
    ``bootstrap_room[i]`` (``__getitem__``), on both legs alike. An integer room would serve a batch too
    (``_normalize_bootstrap_params`` expands it to ``room + i``), but only its first prompt would keep the
    remainder of a pinned data-parallel rank (``new_bootstrap_room``); drawn one by one, each keeps it."""
    if room is None:
        raise ValueError("SGLang PD needs one bootstrap room for both legs: pass new_bootstrap_room()")
    out = dict(body)
    port = prefill.bootstrap_port or DEFAULT_BOOTSTRAP_PORT
    if isinstance(room, int):
        out["bootstrap_host"], out["bootstrap_port"], out["bootstrap_room"] = prefill.host, port, room
        return out
    rooms = list(room)
    out["bootstrap_host"], out["bootstrap_port"] = [prefill.host] * len(rooms), [port] * len(rooms)
    out["bootstrap_room"] = rooms
    return out


def decode_body(body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None) -> Body:
    """Identical to the prefill leg: both are sent at once and meet at the bootstrap server."""
    return prefill_body(body, prefill, room)


def reported_dp_ranks(info: object) -> int | None:
    """The data-parallel rank count in a ``/server_info`` (or deprecated ``/get_server_info``) answer; None
    when it names none.

    0.5.15 answers the ``ServerArgs`` fields as given (``srt/entrypoints/http_server.py`` ``server_info``:
    ``dataclasses.asdict(server_args)``): ``dp_size`` is the rank count, DP attention or not, and there is
    no ``attn_dp_size``. 0.5.22 and 0.5.23 answer the resolved fields (``build_server_info`` in
    ``srt/utils/common.py``, ``ServerArgs.resolved_dict``): ``dp_size`` and ``attn_dp_size``, whose product
    is the count (``num_dp_ranks``, which is derived and not itself reported), ``--dp-size N
    --enable-dp-attention`` showing as ``dp_size`` 1, ``attn_dp_size`` N and ``enable_dp_attention`` true.
    ``dp_size * attn_dp_size`` (1 where absent) reads both."""
    if not isinstance(info, Mapping):
        return None
    dp, attn = _count(info.get("dp_size")), _count(info.get("attn_dp_size", 1))
    return dp * attn if dp is not None and attn is not None else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None
