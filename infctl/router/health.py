"""Passive ejection and re-admission of backends, as pure transitions over an immutable state.

A backend is ejected after ``failures_to_eject`` consecutive failures, or at once on a fatal failure
(connection refused, failed active probe). It stays out for a backoff that doubles with every ejection
since it was last stable, up to ``max_backoff_s``. When the backoff has passed it is re-admitted only by a
successful active probe, never by a request: a request is a user's, and must not be the canary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infctl.config.router import HealthPolicy as HealthPolicy  # the router file's health section


@dataclass(frozen=True, slots=True)
class HealthState:
    consecutive_failures: int = 0
    ejected_until: float | None = None
    """None while the backend is in rotation; else the earliest time a probe may re-admit it."""
    ejections: int = 0
    """Ejections since the backend was last stable; drives the backoff."""
    total_ejections: int = 0
    """Lifetime count, exported as a metric."""
    admitted_at: float = 0.0
    last_error: str | None = None

    @property
    def ejected(self) -> bool:
        return self.ejected_until is not None


def backoff_s(policy: HealthPolicy, ejections: int) -> float:
    """Backoff for the ``ejections``-th ejection (1-based)."""
    return float(min(policy.max_backoff_s, policy.base_backoff_s * 2 ** max(0, ejections - 1)))


def on_failure(
    state: HealthState, policy: HealthPolicy, now: float, *, fatal: bool, error: str
) -> HealthState:
    """A request or probe failed. Ejects when the failure is fatal or the streak reaches the limit."""
    if state.ejected:
        return replace(state, last_error=error)
    failures = state.consecutive_failures + 1
    if not fatal and failures < policy.failures_to_eject:
        return replace(state, consecutive_failures=failures, last_error=error)
    stable = now - state.admitted_at >= policy.stable_after_s
    ejections = 1 if stable else state.ejections + 1
    return replace(
        state,
        consecutive_failures=failures,
        ejected_until=now + backoff_s(policy, ejections),
        ejections=ejections,
        total_ejections=state.total_ejections + 1,
        last_error=error,
    )


def on_request_success(state: HealthState) -> HealthState:
    """A proxied request succeeded: the failure streak ends (ejection is left to probes)."""
    if state.consecutive_failures == 0:
        return state
    return replace(state, consecutive_failures=0)


def on_probe_success(state: HealthState, now: float) -> HealthState:
    """An active probe succeeded: re-admit once the backoff has passed."""
    if state.ejected_until is None:
        return on_request_success(state)
    if now < state.ejected_until:
        return state
    return replace(state, ejected_until=None, consecutive_failures=0, admitted_at=now, last_error=None)
