"""The restart decision: how long to wait before restarting a crashed process (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from infctl.local.settings import SupervisorSettings


@dataclass(frozen=True)
class RestartDecision:
    delay: float
    """Seconds to wait before starting the process again."""
    streak: int
    """Consecutive crashes including this one (1 after a stable run)."""


def next_restart(streak: int, uptime: float, settings: SupervisorSettings) -> RestartDecision:
    """Decide the delay after a crash.

    ``streak`` is the number of consecutive crashes before this one and ``uptime`` how long the process ran
    before this crash. A run of at least ``settings.stable_after`` seconds forgets earlier crashes, so a
    process that crashes once a day always restarts quickly while a crash loop backs off exponentially.
    """
    current = 1 if uptime >= settings.stable_after else streak + 1
    # The exponent is capped so that a long crash loop cannot overflow the float.
    delay = settings.backoff_initial * settings.backoff_factor ** min(current - 1, 64)
    return RestartDecision(delay=min(settings.backoff_max, delay), streak=current)
