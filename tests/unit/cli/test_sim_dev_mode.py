"""``infctl sim --server-dev-mode``: read from vLLM's own ``VLLM_SERVER_DEV_MODE`` too, which is how the demo
(``infctl.local.demo.with_cache_resets``) starts its simulated vLLM engines able to reset their caches."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from infctl.cli import sim as sim_cli
from infctl.cli.main import _register, app
from infctl.sim.settings import SimSettings


def _settings(monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]) -> SimSettings:
    if not any(g.name == "sim" for g in app.registered_groups):
        _register()
    seen: list[SimSettings] = []
    monkeypatch.setattr(sim_cli, "run", lambda cfg, on_ready=None: seen.append(cfg))
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    result = CliRunner().invoke(app, ["sim", *args], env=env)
    assert result.exit_code == 0, result.output
    (cfg,) = seen
    return cfg


def test_dev_mode_comes_from_vllms_variable_or_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _settings(monkeypatch, [], {}).server_dev_mode  # vLLM's default
    assert not _settings(monkeypatch, [], {"VLLM_SERVER_DEV_MODE": "0"}).server_dev_mode
    assert _settings(monkeypatch, [], {"VLLM_SERVER_DEV_MODE": "1"}).server_dev_mode
    assert _settings(monkeypatch, ["--server-dev-mode"], {}).server_dev_mode
