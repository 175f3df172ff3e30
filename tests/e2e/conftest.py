"""Real vLLM (CPU build) behind infctl: two engines and the router by ``infctl deploy --target local``.

The real-engine tests are slow (the engines take ~1-2 minutes to start on two cores) and marked ``slow``; run
them with ``python -m pytest -m slow tests/e2e`` or ``.ci/slow``, which also creates the vLLM virtualenv.

vLLM lives in its own virtualenv so its pins (torch, transformers) never touch the interpreter the rest of the
suite runs on:

- ``INFCTL_VLLM_PYTHON``: that venv's interpreter; default ``~/.cache/infctl/vllm-venv/bin/python`` (where
  ``.ci/slow`` puts it). Absent or without ``vllm``: every test here is skipped, saying so.
- ``INFCTL_TINY_MODEL``: a model directory built by ``tools/make_tiny_model.py``; default: built into the
  session's temporary directory (a few seconds).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import DEFAULT_VENV, REPO, Release, deployed, engine_command, tiny_vllm_model


@pytest.fixture(scope="session")
def vllm_python() -> str:
    path = os.environ.get("INFCTL_VLLM_PYTHON") or str(DEFAULT_VENV / "bin" / "python")
    if not Path(path).exists():
        pytest.skip(f"no vLLM interpreter at {path}: run .ci/slow once, or set INFCTL_VLLM_PYTHON")
    # Importing vllm (torch, transformers) takes ~10 s here, several times that on a loaded machine.
    probe = subprocess.run(
        [path, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True, timeout=600
    )
    if probe.returncode != 0:
        pytest.skip(f"{path} cannot import vllm: {probe.stderr.strip().splitlines()[-1:]}")
    return path


@pytest.fixture(scope="session")
def tiny_model(vllm_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("INFCTL_TINY_MODEL")
    out = Path(given) if given else tmp_path_factory.mktemp("tiny-model")
    subprocess.run(
        [vllm_python, str(REPO / "tools" / "make_tiny_model.py"), str(out)], check=True, timeout=300
    )
    return out


@pytest.fixture(scope="session")
def vllm_release(vllm_python: str, tiny_model: Path) -> Iterator[Release]:
    """Two real vLLM engines and the router (round robin to start with), deployed detached. The engines
    render a chat request's own ``chat_template`` (``--trust-request-chat-template``; a flag, no start-up
    cost), so the router's count of such requests can be checked against theirs."""
    model = tiny_vllm_model(tiny_model, extra_args=["--trust-request-chat-template"])
    profile = {
        "name": "e2e-vllm",
        "target": "local",
        "mode": "aggregated",
        "replicas": 2,
        "model": model,
        "router": {"enabled": True, "policy": "round_robin"},
        "local": {"simulate": False, "engine_command": engine_command(vllm_python, model)},
    }
    with deployed(profile) as release:
        yield release
