"""Moving traffic from an old serving system to a new one, a percentage at a time, behind SLO gates.

Pure core: :mod:`plan` (steps, weights), :mod:`gates` (parse and judge), :mod:`window` (metric deltas),
:mod:`state` (annotations), :mod:`decide` (next weight, rollback target, command transitions).
I/O: :mod:`backends` (router admin API) and :mod:`httproute` (Gateway API) behind :class:`TrafficBackend`;
:mod:`sources` (router ``/metrics`` or Prometheus); :mod:`ops` (one-shot commands) and :mod:`walk` (plans).
"""

from infctl.cutover.backends import Observed, RouterBackend, TrafficBackend
from infctl.cutover.decide import Decision, next_weight, rollback_target
from infctl.cutover.errors import CutoverError, StaleStateError
from infctl.cutover.gates import Gate, GateResult, GroupStats, evaluate, parse_gates
from infctl.cutover.httproute import HTTPRouteBackend
from infctl.cutover.ops import Outcome, View, load, pause, rollback, set_percent, status_dict
from infctl.cutover.plan import Plan, parse_duration, parse_steps, weights_for
from infctl.cutover.sources import GateSource, PrometheusGateSource, RouterMetricsSource
from infctl.cutover.state import CutoverState, Entry, from_annotations
from infctl.cutover.target import Target, open_target
from infctl.cutover.walk import Clock, SystemClock, WalkOptions, WalkReport, WalkSettings, resume, walk

__all__ = [
    "Clock",
    "CutoverError",
    "CutoverState",
    "Decision",
    "Entry",
    "Gate",
    "GateResult",
    "GateSource",
    "GroupStats",
    "HTTPRouteBackend",
    "Observed",
    "Outcome",
    "Plan",
    "PrometheusGateSource",
    "RouterBackend",
    "RouterMetricsSource",
    "StaleStateError",
    "SystemClock",
    "Target",
    "TrafficBackend",
    "View",
    "WalkOptions",
    "WalkReport",
    "WalkSettings",
    "evaluate",
    "from_annotations",
    "load",
    "next_weight",
    "open_target",
    "parse_duration",
    "parse_gates",
    "parse_steps",
    "pause",
    "resume",
    "rollback",
    "rollback_target",
    "set_percent",
    "status_dict",
    "walk",
    "weights_for",
]
