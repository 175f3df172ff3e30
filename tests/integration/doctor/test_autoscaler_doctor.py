"""``infctl doctor --autoscaler URL`` against the daemon's own /metrics server on 127.0.0.1."""

from __future__ import annotations

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.server import MetricsServer
from infctl.autoscaler.startup import Ledger
from infctl.doctor.run import run_doctor
from infctl.doctor.targets import DoctorRequest


async def test_doctor_reports_a_start_up_longer_than_the_hold(unused_tcp_port: int) -> None:
    metrics = AutoscalerMetrics(dry_run=False)
    metrics.hold_s = 60.0
    metrics.started("both", (75.0,), Ledger(desired=1, recent=(75.0,)))
    metrics.over_hold["both"] = True
    server = await MetricsServer.start("127.0.0.1", unused_tcp_port, metrics)
    try:
        report = await run_doctor(DoctorRequest(autoscaler=server.url), timeout_s=5)
    finally:
        await server.close()
    result, memory = report.results
    assert (result.group, result.name, result.status) == ("autoscaler", "startup", "warn")
    assert "both 75s" in result.summary and result.fix is not None and "hold_s" in result.fix
    assert (memory.name, memory.status) == ("memory", "skip")  # this daemon keeps none
    assert report.exit_code == 0  # a warning does not fail the run


async def test_doctor_fails_an_autoscaler_it_cannot_reach(unused_tcp_port: int) -> None:
    report = await run_doctor(DoctorRequest(autoscaler=f"http://127.0.0.1:{unused_tcp_port}"), timeout_s=5)
    (result,) = report.results
    assert result.status == "fail" and "GET /metrics" in result.summary
