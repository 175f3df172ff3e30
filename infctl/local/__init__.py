"""The local target: a deployment's engines, router and autoscaler as supervised processes on this machine.

- :func:`build_plan` (pure) turns a ``DeploymentProfile`` into a :class:`LocalPlan` of :class:`ProcessSpec`;
  daemon builders (``plan.DAEMONS``) add the router and autoscaler beside the engines.
- :func:`serve` (async) runs a plan: health waits, restarts with backoff, ordered shutdown; :func:`run` is
  its foreground sync wrapper. Progress goes to ``<run_dir>/<release>/state.json``.
- :func:`status` and :func:`delete` work from any shell through that state file.
"""

from infctl.local.backoff import RestartDecision, next_restart
from infctl.local.control import delete, status
from infctl.local.plan import DAEMONS, PlanContext, SpecBuilder, build_plan
from infctl.local.procs import port_is_free
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan, PortAllocator, ProcessSpec
from infctl.local.state import ProcessState, RunState, list_releases, read_state
from infctl.local.supervisor import run, serve

__all__ = [
    "DAEMONS",
    "LocalPlan",
    "PlanContext",
    "PortAllocator",
    "ProcessSpec",
    "ProcessState",
    "RestartDecision",
    "RunState",
    "SpecBuilder",
    "SupervisorSettings",
    "build_plan",
    "delete",
    "list_releases",
    "next_restart",
    "port_is_free",
    "read_state",
    "run",
    "serve",
    "status",
]
