"""A tokenizer that does not load stops `infctl router` at start-up with one line naming the file and
the fallback, exit code 2: never a traceback, nor the start-up line of a router that is not listening."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("content", [None, "{not json"])
def test_a_bad_tokenizer_is_one_line_with_the_fallback(tmp_path: Path, content: str | None) -> None:
    spec = tmp_path / "tokenizer.json"
    if content is not None:
        spec.write_text(content)
    with socket.socket() as probe:  # a free port: the tokenizer fails before it is bound
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "infctl", "router", "--tokenizer", str(spec), "--port", str(port),
            "--backend", "http://127.0.0.1:9"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(spec) in done.stderr and "--tokenizer estimate" in done.stderr
    assert "infctl router on" not in done.stderr
