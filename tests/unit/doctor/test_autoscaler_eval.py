"""The autoscaler's start-up verdict, read from what the daemon's own metrics render."""

from __future__ import annotations

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.startup import Ledger
from infctl.doctor.autoscaler_eval import WANTED, evaluate_memory, evaluate_startup
from infctl.doctor.result import CheckResult
from infctl.telemetry import parse_metrics


def exported(hold_s: float | None, startups: dict[str, tuple[float, ...]], may_zero: set[str]) -> str:
    """The /metrics of a daemon that measured ``startups`` per unit and knows the router's ``hold_s``."""
    metrics = AutoscalerMetrics(dry_run=False)
    metrics.hold_s = hold_s
    for unit, samples in startups.items():
        ledger = Ledger(desired=1, recent=samples)
        metrics.started(unit, samples, ledger)
        if unit in may_zero and hold_s is not None:
            metrics.over_hold[unit] = bool(samples) and max(samples) > hold_s
    return metrics.render()


def verdict(text: str) -> CheckResult:
    return evaluate_startup(parse_metrics(text, WANTED), target="http://127.0.0.1:9464")


def test_a_start_up_longer_than_the_hold_warns_with_the_numbers_and_the_fix() -> None:
    result = verdict(exported(180.0, {"m-long": (95.0, 240.0), "m-short": (600.0,)}, {"m-long"}))
    assert result.status == "warn"
    assert "m-long 240s" in result.summary and "180s" in result.summary and "503" in result.summary
    assert "m-short" not in result.summary  # min 1: nothing waits for its start-ups
    assert result.fix is not None and "hold_s above 240s" in result.fix and "min: 1" in result.fix


def test_start_ups_within_the_hold_pass() -> None:
    result = verdict(exported(180.0, {"both": (40.0, 95.0)}, {"both"}))
    assert result.status == "pass" and "95s (both)" in result.summary and "180s" in result.summary


def test_nothing_to_judge_is_skipped() -> None:
    assert verdict(exported(None, {"both": (400.0,)}, set())).status == "skip"  # no unit may go to 0
    unmeasured = verdict(exported(180.0, {"both": ()}, {"both"}))
    assert unmeasured.status == "skip" and "no start-up of both measured yet" in unmeasured.summary


def test_an_autoscaler_given_no_hold_is_not_said_to_have_no_unit_at_zero() -> None:
    # A hand-written or older autoscaler.yaml: a target at min 0 but no hold_when_empty_s, so the daemon
    # exports neither the hold nor the over-hold gauge; doctor cannot tell which units may go to 0.
    result = verdict(exported(None, {"both": (400.0,)}, {"both"}))
    assert result.status == "skip"
    assert "no unit may scale to 0" not in result.summary and "hold_when_empty_s" in result.summary
    no_zero = verdict(exported(180.0, {"both": (400.0,)}, set()))
    assert no_zero.status == "skip" and "no unit may scale to 0" in no_zero.summary


def test_another_programs_metrics_fail() -> None:
    result = verdict("process_cpu_seconds_total 3\n")
    assert result.status == "fail" and result.fix is not None and "9464" in result.fix


def memory_verdict(saved: bool | None) -> CheckResult:
    metrics = AutoscalerMetrics(dry_run=False)
    metrics.memory_saved = saved
    return evaluate_memory(parse_metrics(metrics.render(), WANTED), target="http://127.0.0.1:9464")


def test_the_memory_check_reads_whether_the_last_save_worked() -> None:
    ok, failing, none = memory_verdict(True), memory_verdict(False), memory_verdict(None)
    assert ok.status == "pass" and "a restart resumes" in ok.summary
    assert failing.status == "warn" and "start cold" in failing.summary
    assert failing.fix is not None and "autoscaler-memory" in failing.fix and "get and patch" in failing.fix
    assert none.status == "skip" and "no --memory-file or memory_configmap" in none.summary
