"""No kubeconfig to read is the environment to fix: exit 2 (docs/cli.md), one line naming what was looked
for and a fix naming --kubeconfig and --context. It exited 1, as if the API server had refused something,
and said only the client library's "Service host/port is not set."."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app
from infctl.kube.client import ClientSettings, KubeconfigError, connect

PROFILE = "profiles/qwen3-8b-aggregated.yaml"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: c, user: u, namespace: ns1}}]
current-context: a
"""


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ~/.kube/config, no $KUBECONFIG, not inside a pod."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return tmp_path


def test_no_kubeconfig_and_no_cluster_names_what_was_looked_for(nowhere: Path) -> None:
    with pytest.raises(KubeconfigError) as err:
        connect(ClientSettings())
    assert err.value.exit_code == 2
    assert str(nowhere / ".kube" / "config") in err.value.message and "inside a cluster" in err.value.message
    assert err.value.hint is not None and "--kubeconfig" in err.value.hint and "--context" in err.value.hint


def test_kubeconfig_is_read_when_connecting_and_may_list_files(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{nowhere / 'a'}:{nowhere / 'b'}")
    with pytest.raises(KubeconfigError, match=r"\$KUBECONFIG .*/a, .*/b"):
        connect(ClientSettings())
    (nowhere / "b").write_text(KUBECONFIG)  # the one that exists is read, as kubectl reads the list
    client = connect(ClientSettings())
    assert client.host == "http://127.0.0.1:9" and client.namespace == "ns1"
    client.close()


def test_a_missing_file_or_context_and_an_unreadable_file_are_named(nowhere: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"--kubeconfig .*/nope: no such file"):
        connect(ClientSettings(kubeconfig=nowhere / "nope"))
    good = nowhere / "kc"
    good.write_text(KUBECONFIG)
    with pytest.raises(KubeconfigError, match=r"from .*/kc: .*name nope") as err:
        connect(ClientSettings(kubeconfig=good, context="nope"))
    assert err.value.hint is not None and "--context" in err.value.hint
    bad = nowhere / "bad"
    bad.write_text("clusters: [")
    with pytest.raises(KubeconfigError, match=r"from .*/bad: "):  # was a YAML traceback
        connect(ClientSettings(kubeconfig=bad))


@pytest.mark.parametrize(
    "args",
    [["diff", "-f", PROFILE], ["deploy", "-f", PROFILE], ["status", "--target", "kubernetes", "qwen3-8b"]],
)
def test_commands_exit_2_without_a_kubeconfig(nowhere: Path, args: list[str]) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "no kubeconfig" in result.output and "--kubeconfig FILE" in result.output
    assert "Traceback" not in result.output
