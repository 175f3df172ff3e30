"""`infctl router` announces itself once it really listens: with the port it bound (``--port 0`` picks one),
and never when start-up fails (a tokenizer that does not load: test_router_tokenizer_errors.py)."""

from __future__ import annotations

import re
import selectors
import signal
import subprocess
import sys
import time

import httpx

ANNOUNCED = re.compile(r"infctl router on http://127\.0\.0\.1:(\d+) -> 1 backends")


def _first_line_matching(proc: subprocess.Popen[str], pattern: re.Pattern[str], timeout_s: float) -> str:
    """Standard error read until a line matches ``pattern`` (what came before it, in the failure)."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            line = proc.stderr.readline()
            if not line:
                break
            if pattern.search(line):
                return line
            seen.append(line)
    raise AssertionError(f"no line matching {pattern.pattern!r} in: {''.join(seen)!r}")


def test_port_0_is_announced_as_the_port_bound_and_answered_there() -> None:
    argv = [sys.executable, "-m", "infctl", "router", "--port", "0", "--tokenizer", "words",
            "--backend", "http://127.0.0.1:9"]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = _first_line_matching(proc, ANNOUNCED, timeout_s=120)
        match = ANNOUNCED.search(line)
        assert match is not None
        port = int(match.group(1))
        assert port != 0, line
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
