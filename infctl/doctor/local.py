"""Local-target checks: the ports a profile's plan needs, engine executables, releases left behind.

Reads the run directory's state files and probes ports; no process is started or signalled.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from infctl.config import DeploymentProfile
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.engines.cmdline import python_module
from infctl.errors import LocalTargetError
from infctl.local import build_plan, list_releases, read_state
from infctl.local.deploy import check_installed
from infctl.local.procs import pid_alive
from infctl.local.state import RunState, is_live, is_stale

G: Group = "local"
Alive = Callable[[int, int | None], bool]


def delete_command(release: str, run_dir: Path) -> str:
    return f"infctl delete --release {release} --run-dir {run_dir}"


def check_ports(
    profile: DeploymentProfile, run_dir: Path, *, is_free: Callable[[int], bool], alive: Alive = pid_alive
) -> CheckResult:
    """Every port the plan would take from ``local.base_port`` up is free (or held by this very release)."""
    target = f"release {profile.name}"
    state = read_state(run_dir, profile.name)
    if state is not None and is_live(state, alive=alive):
        return passed(G, "ports", f"held by the running release {profile.name}", target=target)
    plan = build_plan(profile, is_free=lambda _: True, run_dir=run_dir)
    wanted = [(s.name, p) for s in plan.specs for p in (s.port, *s.ports.values())]
    busy = [f"{port} ({name})" for name, port in wanted if not is_free(port)]
    if not busy:
        return passed(G, "ports", f"{len(wanted)} ports free from {profile.local.base_port}", target=target)
    try:
        build_plan(profile, is_free=is_free, run_dir=run_dir)
    except LocalTargetError as err:
        return failed(G, "ports", err.message, err.hint, target=target)
    return warned(
        G,
        "ports",
        f"in use: {', '.join(busy)}; deploy would take the next free ones",
        f"free them (ss -ltnp) or set local.base_port (--set local.base_port="
        f"{profile.local.base_port + 1000})",
        target=target,
    )


def check_executables(profile: DeploymentProfile, run_dir: Path) -> CheckResult:
    """The engine program (or its Python module) the plan runs is installed here."""
    target = f"release {profile.name}"
    plan = build_plan(profile, is_free=lambda _: True, run_dir=run_dir)
    engines = [s for s in plan.specs if s.kind == "engine"]
    try:
        for spec in engines:
            check_installed(spec)
    except LocalTargetError as err:
        return failed(G, "executables", err.message, err.hint, target=target)
    if profile.local.simulate:
        return passed(G, "executables", "simulated engines (python -m infctl sim)", target=target)
    module = python_module(engines[0].argv) if engines else None
    program = engines[0].argv[0] + (f" (module {module})" if module else "") if engines else "none"
    return passed(G, "executables", f"{profile.model.engine} found: {program}", target=target)


def check_release(run_dir: Path, release: str, *, required: bool, alive: Alive = pid_alive) -> CheckResult:
    """The release runs and every process in it is healthy, as its supervisor last recorded."""
    target = f"release {release}"
    state = read_state(run_dir, release)
    if state is None:
        if not required:
            return skipped(G, "release", f"not deployed (no state in {run_dir})", target=target)
        return failed(
            G,
            "release",
            f"no local release {release!r} in {run_dir}",
            "deploy it: infctl deploy --target local -f PROFILE --detach",
            target=target,
        )
    if is_stale(state, alive=alive):
        gone = f"its supervisor (pid {state.supervisor_pid}) is gone; processes may linger"
        return failed(G, "release", gone, f"clean up: {delete_command(release, run_dir)}", target=target)
    return _release_verdict(state, run_dir, required, target)


def _release_verdict(state: RunState, run_dir: Path, required: bool, target: str) -> CheckResult:
    if state.status == "failed":
        return failed(
            G,
            "release",
            f"failed: {state.error or 'no error recorded'}",
            state.hint or f"read the logs in {run_dir / state.release / 'logs'}",
            target=target,
        )
    if state.status in ("stopped", "stopping"):
        if not required:
            return skipped(G, "release", state.status, target=target)
        return failed(G, "release", state.status, "deploy it again", target=target)
    unwell = [f"{p.name}: {p.status}" for p in state.processes if p.status != "healthy"]
    if unwell:
        return failed(
            G,
            "release",
            f"{state.status}; not healthy: {', '.join(unwell)}",
            f"read their logs in {run_dir / state.release / 'logs'}",
            target=target,
        )
    return passed(G, "release", f"{state.status}, {len(state.processes)} processes healthy", target=target)


def check_stale_releases(run_dir: Path, *, skip: str | None = None, alive: Alive = pid_alive) -> CheckResult:
    """No release under the run directory whose supervisor died without cleaning up."""
    stale = []
    for name in list_releases(run_dir):
        state = read_state(run_dir, name)
        if name != skip and state is not None and is_stale(state, alive=alive):
            stale.append(name)
    if stale:
        return warned(
            G,
            "stale releases",
            f"supervisor gone, processes may linger: {', '.join(stale)}",
            "; ".join(delete_command(n, run_dir) for n in stale),
            target=str(run_dir),
        )
    return passed(G, "stale releases", f"none in {run_dir}", target=str(run_dir))
