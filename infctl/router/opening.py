"""A stream's opening events, judged before the client gets any: an engine's 5xx error event there is a
failure to retry, not an answer to relay.

vLLM answers a stream with 200 before generating, so a generation that fails at once (a PD decode that
cannot load its KV, ``kv_load_failure_policy`` ``fail``) ends in-band: ``data: {"error": {..., "code":
500}}`` then ``data: [DONE]``; a chat stream has first had its role chunk, yielded in the same iteration
(vLLM 0.32 ``chat_completion/serving.py`` ``chat_completion_stream_generator``: the ``first_iteration``
chunks, then ``_raise_if_error``; ``generate/base/serving.py``
``_convert_generation_error_to_streaming_response``). The client would get nothing but that error, while
the request could go elsewhere. So the relays hold leading role-only chunks (``resume.role_only``) until
the next event, which arrives with them in practice (the role chunk and the first token's come out of one
iteration): an error event with a status >= 500 makes the try ``UpstreamFailed`` with that status
(``ErrorEvent``), anything else is relayed, the held chunks first. A 4xx error event (a request the engine
refused in-stream) reaches the client as the engine sent it.

Cheap on the hot path: an event is parsed only when it starts like an error event or names a ``"role"``;
a completion stream's first token is a ``startswith`` and a ``find`` away from its client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from infctl.router.resume import data_of, dechunk, error_status, role_only

_ERROR_STARTS = (b'{"error"', b'{"object":"error"', b'{"object": "error"')
_EVENT_ERROR_STARTS = tuple(p + s for p in (b"data: ", b"data:") for s in _ERROR_STARTS)
_ROLE = b'"role"'


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The engine's 5xx error event a stream opened with (the relay raises ``UpstreamFailed`` with it)."""

    status: int
    message: str

    @property
    def reason(self) -> str:
        return f"HTTP 200 stream opened with a {self.status} error event: {self.message}"


Verdict = Literal["relay", "hold"] | ErrorEvent
"""``relay``: send what was held and the rest as it comes; ``hold``: only role-only chunks so far, wait for
the next event; an ``ErrorEvent``: the stream opens with an engine's 5xx error."""


def judge_opening(data: bytes, *, chunked: bool) -> Verdict:
    """The verdict on a stream's body so far (``chunked``: with its HTTP chunked framing, as the lean client
    hands it on), of which the client has had nothing."""
    start = data.find(b"\n") + 1 if chunked else 0
    end = data.find(b"\n\n", start)
    if (
        not data.startswith(_EVENT_ERROR_STARTS, start)
        and data.find(_ROLE, start, end if end >= 0 else None) < 0
    ):
        return "relay"  # the first event is neither: the hot path of every completion stream
    if chunked:
        data, _ = dechunk(data)
    events = data.replace(b"\r\n", b"\n").split(b"\n\n")
    for event in events[:-1]:  # the last one: still arriving (or b"")
        if not event.strip():
            continue
        payload = data_of(event)
        if payload is None or not (payload.startswith(_ERROR_STARTS) or _ROLE in payload):
            return "relay"
        try:
            chunk = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return "relay"
        if not isinstance(chunk, dict):
            return "relay"
        status = error_status(chunk)
        if status is not None:
            return _failed(chunk, status) if status >= 500 else "relay"
        if not role_only(chunk):
            return "relay"
    return "hold"


def _failed(chunk: dict[str, object], status: int) -> ErrorEvent:
    error = chunk.get("error")
    message = error.get("message") if isinstance(error, dict) else chunk.get("message")
    return ErrorEvent(status, str(message))
