"""What the client saw for each request: the raw record every metric is computed from.

Times are seconds on the run's monotonic clock (``time.perf_counter`` minus the run's start), so records
from one run compare directly and serialize as small numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ErrorClass = Literal["http_status", "in_stream_error", "timeout", "truncated_stream", "connection"]
"""Why a request failed.

``http_status``      the server answered a status other than 200 (``status`` holds it);
``in_stream_error``  an error event in the stream (vLLM ``{"error": ...}``, SGLang ``{"object": "error"}``);
``timeout``          no complete answer within the request timeout;
``truncated_stream`` the stream ended (or the connection dropped) before ``[DONE]`` or a finish reason;
``connection``       no response at all (refused, reset before the status line, DNS).
"""

ERROR_CLASSES: tuple[ErrorClass, ...] = (
    "http_status",
    "in_stream_error",
    "timeout",
    "truncated_stream",
    "connection",
)


@dataclass(slots=True)
class RequestRecord:
    """One request's timeline and token counts, as measured on the client."""

    index: int
    """Position in the run (0-based, warm-up requests excluded)."""
    stage: int
    """Index of the load stage that sent it."""
    scheduled_s: float
    """When the load plan wanted it sent."""
    sent_s: float = 0.0
    """When the client started sending it; ``sent_s - scheduled_s`` is the send lag."""
    end_s: float = 0.0
    """When the response finished (last byte, error or timeout)."""
    chunk_times: list[float] = field(default_factory=list)
    """Arrival time of every SSE event carrying non-empty content (role-only and empty ones excluded)."""
    input_tokens: int = 0
    """``usage.prompt_tokens`` when the server reported it, else the workload's own count."""
    output_tokens: int = 0
    """``usage.completion_tokens`` when reported, else the number of content events."""
    output_from_usage: bool = False
    cached_tokens: int | None = None
    """``usage.prompt_tokens_details.cached_tokens``, when the server reports it."""
    error: ErrorClass | None = None
    error_detail: str = ""
    """A short human description: ``HTTP 503: ...``, the in-stream message, ``after 12 events``."""
    status: int | None = None
    """HTTP status of the response, None when none arrived."""
    session: int | None = None
    """Conversation id for multi-turn workloads."""
    group: int | None = None
    """Shared-prefix group or mixture component the request came from."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def send_lag_s(self) -> float:
        return self.sent_s - self.scheduled_s

    @property
    def error_kind(self) -> str | None:
        """``http_503``, ``timeout`` ...: the class, with the status for HTTP errors."""
        if self.error is None:
            return None
        if self.error == "http_status" and self.status is not None:
            return f"http_{self.status}"
        return self.error
