"""Pure verdicts on a running autoscaler's ``/metrics``: do its units that may scale to 0 start within the
router's hold? Can it save its memory, so that a restart resumes rather than starting cold?

The autoscaler measures each scale-up's start-up, never a restart (:mod:`infctl.autoscaler.startup`), and
exports the longest of each unit's recent ones beside the router's ``hold_when_empty_s`` it was given; a
unit that may scale to 0 carries ``infctl_autoscaler_startup_over_hold``. A start-up longer than the hold
means the first request after a quiet spell gets a 503.
"""

from __future__ import annotations

from infctl.autoscaler.metrics import PREFIX
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.telemetry import MetricFamilies

G: Group = "autoscaler"
HOLD = f"{PREFIX}hold_when_empty_seconds"
LONGEST = f"{PREFIX}replica_startup_longest_seconds"
OVER = f"{PREFIX}startup_over_hold"
DRY_RUN = f"{PREFIX}dry_run"
"""Always exported: tells an autoscaler's /metrics from another program's."""
MEMORY = f"{PREFIX}memory_saved"
WANTED = frozenset({HOLD, LONGEST, OVER, DRY_RUN, MEMORY})


def evaluate_startup(families: MetricFamilies, *, target: str = "") -> CheckResult:
    """The longest recent start-up of each unit that may scale to 0, against the router's hold."""
    if DRY_RUN not in families:
        return failed(
            G,
            "startup",
            f"no {DRY_RUN} in GET /metrics",
            "is this an infctl autoscaler's --host:--port (default 127.0.0.1:9464)?",
            target=target,
        )
    may_zero = sorted(s.labels.get("unit", "") for s in families.get(OVER, []))
    hold = families.get(HOLD)
    if not hold:
        # Without the hold the daemon flags no unit, so whether one may scale to 0 is not known here.
        return skipped(
            G,
            "startup",
            "the autoscaler was given no router hold (autoscaler.yaml's hold_when_empty_s, which infctl "
            "render writes when a unit may scale to 0): start-ups are not checked against it",
            target=target,
        )
    if not may_zero:
        return skipped(G, "startup", "no unit may scale to 0: nothing waits for a start-up", target=target)
    hold_s = hold[0].value
    longest = {s.labels.get("unit", ""): s.value for s in families.get(LONGEST, []) if s.value == s.value}
    measured = {u: longest[u] for u in may_zero if u in longest}
    if not measured:
        return skipped(
            G,
            "startup",
            f"no start-up of {', '.join(may_zero)} measured yet (none scaled up since the daemon started)",
            target=target,
        )
    slow = {u: s for u, s in measured.items() if s > hold_s}
    if slow:
        worst = max(slow.values())
        units = ", ".join(f"{u} {s:.0f}s" for u, s in sorted(slow.items()))
        return warned(
            G,
            "startup",
            f"replicas started slower than the router holds a request ({hold_s:g}s): {units}; the first "
            "request after a quiet spell gets a 503",
            f"raise scale_to_zero.hold_s above {worst:.0f}s (e.g. hold_s: {_above(worst)}), or keep min: 1",
            target=target,
        )
    unit, seconds = max(measured.items(), key=lambda kv: kv[1])
    return passed(
        G,
        "startup",
        f"longest recent start-up {seconds:.0f}s ({unit}) within the router's hold of {hold_s:g}s",
        target=target,
    )


def _above(seconds: float) -> int:
    """A round hold with room above ``seconds``: the next multiple of 30 s past 1.5 times it."""
    return int((seconds * 1.5 // 30 + 1) * 30)


def evaluate_memory(families: MetricFamilies, *, target: str = "") -> CheckResult:
    """Whether the autoscaler's last save of its memory (``--memory-file`` or ``memory_configmap``) worked."""
    saved = families.get(MEMORY)
    if DRY_RUN not in families:
        return skipped(G, "memory", f"no {DRY_RUN} in GET /metrics: not an infctl autoscaler", target=target)
    if not saved:
        return skipped(
            G,
            "memory",
            "keeps no memory across restarts (no --memory-file or memory_configmap), or has not decided yet: "
            "a restart starts cold, its forecast only reacting for a window",
            target=target,
        )
    if saved[0].value != 1:
        return warned(
            G,
            "memory",
            "its last save of its memory failed: a restart will start cold (cooldowns and forecast lost)",
            "its log names the cause; on Kubernetes the ConfigMap <release>-autoscaler-memory must exist "
            "(infctl deploy -f PROFILE renders it) and its Role must allow get and patch on it",
            target=target,
        )
    return passed(G, "memory", "saves its memory after every decision: a restart resumes", target=target)
