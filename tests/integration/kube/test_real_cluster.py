"""Opt-in: a server-side dry run of every shipped profile against the cluster KUBECONFIG points at.

Skipped unless KUBECONFIG is set. Nothing is stored (server dry run); a missing CRD skips, not fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infctl.config import load_deployment
from infctl.kube import ClientSettings, DeployOptions, MissingCRDError, connect, deploy_release
from infctl.manifests import RenderOptions, render

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"), reason="set KUBECONFIG to run against a cluster"
)


@pytest.mark.parametrize("stem", ["qwen3-8b-aggregated", "kimi-k2-pool", "deepseek-v3-group"])
def test_server_dry_run(stem: str) -> None:
    client = connect(ClientSettings(kubeconfig=Path(os.environ["KUBECONFIG"])))
    profile = load_deployment(ROOT / "profiles" / f"{stem}.yaml", ["namespace=infctl-e2e"])
    objects = render(profile, RenderOptions())
    try:
        report = deploy_release(client, objects, release=profile.name, namespace="infctl-e2e",
                                options=DeployOptions(dry_run="server", prune=False))  # fmt: skip
    except MissingCRDError as err:
        pytest.skip(f"{err.message} ({err.hint})")
    assert len(report.applied) == len(objects)
