"""``infctl doctor``: checks in groups (local, cluster, engines, router, autoscaler), each with a fix.

- :func:`build_request` turns CLI options into a :class:`DoctorRequest` (engine and router targets resolved
  from URLs, a profile, a local release);
- :func:`run_doctor` (async) / :func:`doctor` (sync) run every check concurrently under a timeout and return
  a :class:`DoctorReport` of :class:`CheckResult`;
- the verdicts are pure functions (``engine_eval``, ``router_eval``, ``cluster_eval``, ``topology``,
  ``crds``) over what the probes fetched, tested on fixtures; the probes (``engine_probe``, ``kv_probe``,
  ``router_probe``, ``autoscaler_probe``, ``cluster_probe``, ``router_cluster``, ``autoscaler_cluster``,
  ``local``) do the I/O through injectable clients (:class:`DoctorDeps`); on a cluster, a profile's router
  and autoscaler are found by the Services render gives them and read through the API server's service
  proxy (``cluster_service``, ``proxy_transport``).
"""

from infctl.doctor.cluster_probe import KubeFactory, KubeRequester
from infctl.doctor.registry import DEFAULT_TIMEOUT_S, Check, run_checks
from infctl.doctor.resolve import build_request, parse_engine_spec
from infctl.doctor.result import GROUPS, CheckResult, DoctorReport, Group, Status
from infctl.doctor.run import DoctorDeps, doctor, run_doctor
from infctl.doctor.targets import DoctorRequest, EngineTarget, RouterTarget

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GROUPS",
    "Check",
    "CheckResult",
    "DoctorDeps",
    "DoctorReport",
    "DoctorRequest",
    "EngineTarget",
    "Group",
    "KubeFactory",
    "KubeRequester",
    "RouterTarget",
    "Status",
    "build_request",
    "doctor",
    "parse_engine_spec",
    "run_checks",
    "run_doctor",
]
