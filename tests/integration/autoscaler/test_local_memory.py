"""A local release's autoscaler keeps its memory in the release's directory: killed, the supervisor restarts
it and it resumes from what it saved (the daemon's log says so), as a restarted pod reads its ConfigMap."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from localkit import local_profile, supervised, until

from infctl.local import build_plan, port_is_free
from infctl.local.plan import MEMORY_FILE
from infctl.local.state import read_state


async def test_a_killed_autoscaler_resumes_from_its_memory(tmp_path: Path) -> None:
    profile = local_profile(
        tmp_path,
        "memo",
        base_port=31500,
        model={"sim": {"profile": "llama3-8b-h100", "num_gpu_blocks": 512, "speedup": 100}},
        router={"enabled": True, "policy": "round_robin"},
        autoscaler={"enabled": True, "both": {"min": 1, "max": 2}, "interval_s": 20},
    )
    plan = build_plan(profile, is_free=port_is_free)
    memory = tmp_path / "memo" / MEMORY_FILE
    seen: dict[str, object] = {}

    async def saved() -> bool:
        return memory.is_file() and json.loads(memory.read_text())["version"] == 1

    async def restarted_and_restored() -> bool:
        state = read_state(tmp_path, "memo")
        proc = state.process("autoscaler") if state is not None else None
        log = Path(proc.log).read_text() if proc is not None and Path(proc.log).is_file() else ""
        seen["restarts"], seen["log"] = proc.restarts if proc else None, log[-400:]
        return proc is not None and proc.restarts >= 1 and "memory: restored 1 unit(s)" in log

    async with supervised(plan, ready_within=60):
        await until(saved, within=30)  # written after its first decision
        state = read_state(tmp_path, "memo")
        assert state is not None
        pid = state.process("autoscaler").pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await until(restarted_and_restored, within=60, seen=seen)
