"""Where the daemon serves /metrics and /health: the rendered autoscaler.yaml's host and port (the pod's
address, where Prometheus scrapes it), which ``--host`` and ``--port`` override, and loopback:9464 when a
file names neither, as before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infctl.autoscaler.daemon import AutoscalerConfig
from infctl.autoscaler.setup import Options, build
from infctl.config import load_deployment
from infctl.manifests.render import render

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """Credentials for an API server nobody calls: building the daemon makes no request."""
    path = tmp_path / "kubeconfig"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    context = {"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "inference"}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "contexts": [context],
                "current-context": "c",
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return path


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    objs = render(load_deployment(ROOT / "profiles" / "qwen3-8b-aggregated.yaml"))
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and "autoscaler.yaml" in o.get("data", {}))
    path = tmp_path / "autoscaler.yaml"
    path.write_text(cm["data"]["autoscaler.yaml"])
    return path


def test_the_rendered_file_listens_on_the_pods_address(rendered: Path, kubeconfig: Path) -> None:
    cfg, _ = build(Options(file=rendered, kube={"kubeconfig": kubeconfig}))
    assert (cfg.host, cfg.port) == ("0.0.0.0", 9464)


def test_flags_win_over_the_file(rendered: Path, kubeconfig: Path) -> None:
    cfg, _ = build(Options(file=rendered, host="127.0.0.1", port=0, kube={"kubeconfig": kubeconfig}))
    assert (cfg.host, cfg.port) == ("127.0.0.1", 0)


def test_a_file_that_names_no_address_keeps_loopback(rendered: Path, kubeconfig: Path) -> None:
    data = yaml.safe_load(rendered.read_text())
    del data["host"], data["port"]
    rendered.write_text(yaml.safe_dump(data))
    cfg, _ = build(Options(file=rendered, kube={"kubeconfig": kubeconfig}))
    assert (cfg.host, cfg.port) == (AutoscalerConfig.host, AutoscalerConfig.port) == ("127.0.0.1", 9464)
