"""The check registry: checks in groups, run concurrently, each under a timeout.

A :class:`Check` is one unit of I/O (probe an engine, read the cluster) that returns the findings it
produced; the findings come from pure evaluation functions in the group modules (``engine_eval``,
``router_eval``, ``cluster_eval``, ...), so they are tested on text fixtures without any server.
A check that times out or raises becomes a failed result naming the check, never a traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from infctl.doctor.result import CheckResult, DoctorReport, Group, failed, ordered
from infctl.errors import InfctlError

DEFAULT_TIMEOUT_S = 10.0
"""Seconds one check may take (a probe of an engine, of the router, of the cluster)."""


@dataclass(frozen=True)
class Check:
    """One unit of checking work."""

    group: Group
    name: str
    """Name used when the check itself fails (timeout, unexpected error)."""
    run: Callable[[], Awaitable[Sequence[CheckResult]]]
    target: str = ""


async def run_check(check: Check, timeout_s: float) -> list[CheckResult]:
    """The check's findings; a timeout or an error becomes one failed finding."""
    try:
        async with asyncio.timeout(timeout_s):
            return list(await check.run())
    except TimeoutError:
        return [
            failed(
                check.group,
                check.name,
                f"no answer within {timeout_s:g} s",
                "check that it is reachable from here, or raise --timeout",
                target=check.target,
            )
        ]
    except InfctlError as err:
        return [failed(check.group, check.name, err.message, err.hint, target=check.target)]
    except Exception as err:  # a bug in one check must not hide every other finding
        summary = f"the check crashed: {type(err).__name__}: {err}"
        return [failed(check.group, check.name, summary, "report this as an infctl bug", target=check.target)]


async def run_checks(checks: Iterable[Check], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> DoctorReport:
    """Run every check at once; findings come back in group order, then in the order checks were given."""
    batches = await asyncio.gather(*(run_check(c, timeout_s) for c in checks))
    return DoctorReport(ordered(r for batch in batches for r in batch))
