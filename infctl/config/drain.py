"""How an engine replica stops without cutting the requests it is serving (Kubernetes target)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from infctl.config._base import ProfileModel

SHUTDOWN_MARGIN_S = 30
"""Seconds the grace period leaves for the engine's own shutdown after its requests have finished."""


class DrainSettings(ProfileModel):
    """An engine pod told to stop (scale-in, rollout, node drain) first stops taking requests, then waits
    for those in flight: its preStop hook polls the engine's own /metrics until nothing runs or waits."""

    timeout_s: Annotated[int, Field(ge=1)] = 600
    """Longest the requests in flight of a stopping engine may still run, seconds (a long generation's
    worth). Default 600. Also how long the autoscaler waits for them before scaling in anyway."""
    settle_s: Annotated[int, Field(ge=0)] = 5
    """Seconds the preStop hook waits first, for every router to see the pod terminating and stop sending
    it requests. Default 5."""

    @property
    def grace_period_s(self) -> int:
        """``terminationGracePeriodSeconds``: settle, drain, and the engine's own shutdown."""
        return self.settle_s + self.timeout_s + SHUTDOWN_MARGIN_S
