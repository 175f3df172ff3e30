"""How the local supervisor starts, watches, restarts and stops its processes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SupervisorSettings:
    """Timings of the local supervisor. Every duration is in seconds."""

    health_timeout: float = 180.0
    """How long a started process has to answer its health URL with 200 (a real vLLM on CPU needs ~75 s)."""
    health_interval: float = 0.2
    """Pause between two health probes of a starting process."""
    probe_timeout: float = 2.0
    """Timeout of one health probe request."""
    grace_period: float = 10.0
    """Time between SIGTERM and SIGKILL to a process group when stopping."""
    backoff_initial: float = 0.5
    """Delay before restarting a process after its first crash."""
    backoff_factor: float = 2.0
    """Each further consecutive crash multiplies the delay by this."""
    backoff_max: float = 30.0
    """Upper bound of the restart delay."""
    stable_after: float = 60.0
    """A process that ran at least this long before crashing counts as a first crash again (backoff reset)."""
    drain_timeout: float = 60.0
    """Scaling in: longest wait for the router to finish an engine's requests in flight before stopping it."""
    reconcile_interval: float = 0.5
    """Scaling: how often the supervisor converges on the desired counts and checks the router's backends."""
