"""The registry: concurrent checks, timeouts and crashes become findings, group order, exit codes."""

from __future__ import annotations

import asyncio

from infctl.doctor.registry import Check, run_checks
from infctl.doctor.result import CheckResult, DoctorReport, failed, passed, warned, worst
from infctl.errors import EngineError


def returning(*results: CheckResult):  # type: ignore[no-untyped-def]
    async def run() -> list[CheckResult]:
        return list(results)

    return run


async def test_checks_run_concurrently_in_group_order() -> None:
    # Each engine check answers only once all five are running: run one after another, the first would
    # wait until the timeout failed it (concurrency shown without reading a clock).
    running: list[int] = []
    all_in = asyncio.Event()

    async def slow() -> list[CheckResult]:
        running.append(1)
        if len(running) == 5:
            all_in.set()
        await all_in.wait()
        return [passed("engines", "health", "ok")]

    checks = [
        Check("router", "r", returning(passed("router", "health", "ok"))),
        *(Check("engines", f"e{i}", slow) for i in range(5)),
        Check("local", "l", returning(warned("local", "ports", "busy", "free them"))),
    ]
    report = await run_checks(checks, timeout_s=30)
    assert [r.group for r in report.results] == ["local"] + ["engines"] * 5 + ["router"]
    assert report.ok and report.exit_code == 0
    assert report.counts == {"pass": 6, "warn": 1, "fail": 0, "skip": 0}


async def test_a_slow_check_times_out_as_a_failure_naming_it() -> None:
    async def hang() -> list[CheckResult]:
        await asyncio.sleep(10)
        return []

    report = await run_checks([Check("engines", "engine", hang, "http://x:1")], timeout_s=0.05)
    [result] = report.results
    assert (result.status, result.target) == ("fail", "http://x:1")
    assert "no answer within 0.05 s" in result.summary and "--timeout" in (result.fix or "")
    assert report.exit_code == 1


async def test_errors_become_findings_with_their_hint() -> None:
    async def broken() -> list[CheckResult]:
        raise EngineError("engine said no", hint="restart it")

    async def buggy() -> list[CheckResult]:
        raise KeyError("oops")

    report = await run_checks([Check("engines", "a", broken), Check("router", "b", buggy)])
    first, second = report.results
    assert (first.summary, first.fix) == ("engine said no", "restart it")
    assert "crashed: KeyError" in second.summary and "bug" in (second.fix or "")


def test_report_json_shape_and_worst() -> None:
    report = DoctorReport((failed("cluster", "crds", "missing", "install it"),))
    assert report.to_dict() == {
        "ok": False, "counts": {"pass": 0, "warn": 0, "fail": 1, "skip": 0},
        "results": [{"group": "cluster", "name": "crds", "status": "fail", "summary": "missing",
                     "fix": "install it", "target": ""}],
    }  # fmt: skip
    assert worst(["pass", "warn", "skip"]) == "warn" and worst(["skip"]) == "skip"
