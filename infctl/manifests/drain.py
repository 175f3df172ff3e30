"""The engine pods' preStop hook: stop taking requests, then wait for those in flight (pure data).

When a pod is told to stop (a scale-in, a rollout, a node drain), Kubernetes marks it terminating, which
takes it out of every router's backends (``infctl.router.discovery`` drops terminating pods) and out of
the Services' endpoints, then runs the preStop hook, and only then sends the engine SIGTERM. vLLM and
SGLang abort what they are serving on SIGTERM, so the hook waits: ``settle_s`` for the routers to notice,
then until the engine's own /metrics show nothing running or waiting twice in a row, at most
``timeout_s``. ``terminationGracePeriodSeconds`` covers the settle, the drain and the engine's shutdown.

Workers of a multi-node replica serve no HTTP; their hook waits on their leader's engine
(``LWS_LEADER_ADDRESS``), so a group stays whole until its leader has finished.

The script runs with the image's ``python3`` (both engines are Python) and the standard library only.
"""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile
from infctl.engines import get_adapter

LEADER = "env:LWS_LEADER_ADDRESS"
"""Host argument meaning: the leader's address from that variable (exec hooks get no ``$(VAR)`` expansion)."""
SUBGROUP = "lws-subgroup:"
"""Host argument ``lws-subgroup:<n>``: in a PD-group set (``infctl.manifests.group_set``), the rank 0 of the
pod's own engine replica (every ``n`` pods of the LWS group): this pod when it is one, else its address
by LWS's pod naming."""

WAIT_IDLE = """\
import os, sys, time, urllib.request
host, port, settle, timeout = sys.argv[1:5]
names = set(sys.argv[5:])
host = os.environ.get(host[4:], "") if host.startswith("env:") else host
url = "http://%s:%s/metrics" % ("[%s]" % host if ":" in host else host, port)
time.sleep(float(settle))
end, calm = time.monotonic() + float(timeout), 0
while calm < 2 and time.monotonic() < end:
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception:
        break
    busy = 0.0
    for line in text.splitlines():
        if line.split("{", 1)[0].split(" ", 1)[0] in names:
            busy += float(line.rsplit("}", 1)[-1].split()[0])
    calm = calm + 1 if busy == 0 else 0
    time.sleep(1)
"""
"""argv: host (or ``env:VAR``), port, settle seconds, timeout seconds, then the metric names to sum. Exits 0
when the engine is idle, unreachable (nothing left to wait for) or the timeout has passed."""

_HOST_LINE = 'host = os.environ.get(host[4:], "") if host.startswith("env:") else host\n'
WAIT_IDLE_SUBGROUP = WAIT_IDLE.replace(
    _HOST_LINE,
    _HOST_LINE
    + """\
if host.startswith("lws-subgroup:"):
    n, i = int(host[13:]), int(os.environ["LWS_WORKER_INDEX"])
    lead, _, rest = os.environ["LWS_LEADER_ADDRESS"].partition(".")
    host = "127.0.0.1" if i % n == 0 else "%s.%s" % (lead if i < n else "%s-%d" % (lead, i - i % n), rest)
""",
)
""":data:`WAIT_IDLE` that also takes host ``lws-subgroup:<n>`` (:data:`SUBGROUP`)."""


def prestop_command(profile: DeploymentProfile, port: int, *, leader: bool) -> list[str]:
    """The exec command of an engine container's preStop hook."""
    metrics = get_adapter(profile.model.engine).signal_metrics
    drain = profile.drain
    host = "127.0.0.1" if leader else LEADER
    return [
        "python3",
        "-c",
        WAIT_IDLE,
        host,
        str(port),
        str(drain.settle_s),
        str(drain.timeout_s),
        metrics.running,
        *metrics.queues,  # an SGLang PD engine's bootstrap, prealloc and transfer queues too
        *metrics.busy,  # and a prefill's KV still being sent
    ]


def lifecycle(profile: DeploymentProfile, port: int, *, leader: bool) -> dict[str, Any]:
    """The container's ``lifecycle`` stanza."""
    return {"preStop": {"exec": {"command": prestop_command(profile, port, leader=leader)}}}
