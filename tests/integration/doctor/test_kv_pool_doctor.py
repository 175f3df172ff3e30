"""doctor checks the KV pool from where it runs: a TCP connection to each address the engines use (a real
listener on 127.0.0.1 as the LMCache server, a real ``mooncake_master`` when one is installed), a failure with
the fix when nothing answers, a warning when a rendered pool's cluster DNS name does not resolve here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor import DoctorRequest, doctor

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
LMCACHE = ["model.kv_offload.backend=lmcache", "model.kv_offload.size_gib=4"]
LMCACHE += ["model.kv_offload.storage_backend=lmcache"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pool_findings(profile: DeploymentProfile) -> list[tuple[str, str, str]]:
    report = doctor(DoctorRequest(profile=profile), timeout_s=4)
    return [(r.status, r.summary, r.fix or "") for r in report.results if r.name == "kv pool"]


@pytest.fixture
def listener() -> Iterator[int]:
    """A real TCP server on 127.0.0.1 standing in for the LMCache server (doctor only connects)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_running_lmcache_server_passes_and_a_closed_port_fails_with_the_fix(listener: int) -> None:
    up = load_deployment(QWEN, [*LMCACHE, f"model.kv_offload.pool.address=127.0.0.1:{listener}"])
    assert pool_findings(up) == [("pass", f"server accepts connections at 127.0.0.1:{listener}", "")]
    closed = free_port()
    down = load_deployment(QWEN, [*LMCACHE, f"model.kv_offload.pool.address=127.0.0.1:{closed}"])
    [(status, summary, fix)] = pool_findings(down)
    assert status == "fail" and summary.startswith(f"server at 127.0.0.1:{closed}: ")
    assert "model.kv_offload.pool.address" in fix


def test_a_rendered_pool_seen_from_outside_the_cluster_is_a_warning_with_a_port_forward() -> None:
    findings = pool_findings(load_deployment(DEEPSEEK))
    assert [f[0] for f in findings] == ["warn", "warn"]
    assert "deepseek-v3-kv-master.inference.svc:50051" in findings[0][1]
    assert "port-forward svc/deepseek-v3-kv-master 50051" in findings[0][2]
    assert "deepseek-v3-kv-master.inference.svc:8080" in findings[1][1]


def test_profiles_without_a_pool_get_no_pool_check() -> None:
    assert pool_findings(load_deployment(QWEN)) == []


def mooncake_master() -> str | None:
    """A real mooncake_master (the mooncake-transfer-engine wheel's): $INFCTL_MOONCAKE_MASTER or on PATH."""
    return os.environ.get("INFCTL_MOONCAKE_MASTER") or shutil.which("mooncake_master")


@pytest.mark.skipif(
    mooncake_master() is None, reason="no mooncake_master (pip install mooncake-transfer-engine)"
)
def test_a_real_mooncake_master_started_as_render_starts_it_passes_both_addresses() -> None:
    binary = mooncake_master()
    assert binary is not None
    rpc, meta, metrics = free_port(), free_port(), free_port()
    argv = [binary, f"--rpc_port={rpc}", "--enable_http_metadata_server=true"]
    argv += [f"--http_metadata_server_port={meta}", f"--metrics_port={metrics}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(_open(p) for p in (rpc, meta)):
            time.sleep(0.2)
        profile = load_deployment(
            DEEPSEEK,
            [
                "model.kv_offload.pool.servers=null",
                f"model.kv_offload.pool.address=127.0.0.1:{rpc}",
                f"model.kv_offload.pool.metadata_server=http://127.0.0.1:{meta}/metadata",
            ],
        )
        assert [f[0] for f in pool_findings(profile)] == ["pass", "pass"]
    finally:
        proc.terminate()
        proc.wait(10)
    assert [f[0] for f in pool_findings(profile)] == ["fail", "fail"]


def _open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
