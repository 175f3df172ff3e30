"""``deploy --help`` and ``diff --help`` say what their exit 2 covers: since 431925f a missing kubeconfig
(KubeconfigError) exits 2 too, where they said "bad profile or flag" only."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app


@pytest.mark.parametrize("command", ["deploy", "diff"])
def test_the_help_says_a_missing_kubeconfig_exits_2(command: str) -> None:
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"}).stdout
    assert "or no kubeconfig" in " ".join(text.split())
