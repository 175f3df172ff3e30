"""Server-sent events of an OpenAI-style stream, parsed after the fact from timestamped network reads.

The client's read loop only appends ``(arrival time, bytes)``; all parsing happens here, once the stream
has ended, so no Python work runs per byte (or per event) while tokens are arriving. An event's time is the
arrival of the read that completed it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_fast_loads: Callable[[bytes], Any] = json.loads
try:  # a C JSON parser, when installed, halves the client's per-event cost
    import orjson

    _fast_loads = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    pass


def _loads(payload: bytes) -> Any:
    try:
        return _fast_loads(payload)
    except ValueError:
        # orjson is stricter (NaN, lone surrogates): the standard parser has the last word
        return json.loads(payload)


@dataclass(slots=True)
class StreamOutcome:
    """What one response stream said."""

    content_times: list[float] = field(default_factory=list)
    """Arrival time of every event that carried non-empty content (text, delta content or reasoning)."""
    done: bool = False
    """``data: [DONE]`` arrived."""
    finish_reason: str | None = None
    error: str | None = None
    """The first in-stream error's message."""
    usage: dict[str, Any] | None = None
    """The last ``usage`` object seen."""
    events: int = 0

    @property
    def complete(self) -> bool:
        """The stream ended the way a finished generation ends."""
        return self.done or self.finish_reason is not None


def parse_stream(reads: Sequence[tuple[float, bytes]]) -> StreamOutcome:
    out = StreamOutcome()
    buf = b""
    t = 0.0
    for t, data in reads:
        buf = buf + data if buf else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        if b"\n\n" not in buf:
            continue
        *events, buf = buf.split(b"\n\n")
        for ev in events:
            _event(out, t, ev)
    if buf.strip():
        _event(out, t, buf)  # a last event without its blank line: lenient, as most clients are
    return out


def parse_json_response(t: float, body: bytes) -> StreamOutcome:
    """A non-streamed answer (a server that ignored ``stream: true``): all content arrives at ``t``."""
    out = StreamOutcome(done=True)
    _payload(out, t, body, b"")
    return out


def _event(out: StreamOutcome, t: float, ev: bytes) -> None:
    if ev.startswith(b"data: ") and b"\n" not in ev:  # the common single-line event
        _payload(out, t, ev[6:], b"")
        return
    data: list[bytes] = []
    etype = b""
    for line in ev.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            etype = line[6:].strip()
    if data:
        _payload(out, t, b"\n".join(data), etype)
    elif etype == b"error" and out.error is None:
        out.error = "error event without data"


def _payload(out: StreamOutcome, t: float, payload: bytes, etype: bytes) -> None:
    out.events += 1
    if payload.strip() == b"[DONE]":
        out.done = True
        return
    try:
        obj = _loads(payload)
    except ValueError:
        if out.error is None:
            out.error = f"malformed event: {payload[:120]!r}"
        return
    if not isinstance(obj, dict):
        return
    err = _error_message(obj, etype)
    if err is not None:
        if out.error is None:
            out.error = err
        return
    content = False
    for choice in obj.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if _has_content(choice):
            content = True
        reason = choice.get("finish_reason")
        if reason:
            out.finish_reason = str(reason)
    if content:
        out.content_times.append(t)
    usage = obj.get("usage")
    if isinstance(usage, dict):
        out.usage = usage


def _has_content(choice: dict[str, Any]) -> bool:
    text = choice.get("text")
    if text:
        return True
    delta = choice.get("delta") or choice.get("message")
    if isinstance(delta, dict):
        return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))
    return False


def _error_message(obj: dict[str, Any], etype: bytes) -> str | None:
    err = obj.get("error")
    if err:
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    if obj.get("object") == "error" or etype == b"error":
        return str(obj.get("message") or obj)
    return None
