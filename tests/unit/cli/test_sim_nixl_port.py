"""``infctl sim --nixl-side-channel-port``: read from vLLM's own ``VLLM_NIXL_SIDE_CHANNEL_PORT`` too, which is
how ``--target local`` gives each simulated vLLM PD engine its port (the same variable as a real one)."""

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
    monkeypatch.delenv("VLLM_NIXL_SIDE_CHANNEL_PORT", raising=False)
    result = CliRunner().invoke(app, ["sim", "--role", "prefill", *args], env=env)
    assert result.exit_code == 0, result.output
    (cfg,) = seen
    return cfg


def test_the_side_channel_port_comes_from_vllms_variable_or_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _settings(monkeypatch, [], {}).nixl_side_channel_port == 5600  # vLLM's default
    variable = {"VLLM_NIXL_SIDE_CHANNEL_PORT": "18040"}
    assert _settings(monkeypatch, [], variable).nixl_side_channel_port == 18040
    flag = ["--nixl-side-channel-port", "18050"]
    assert _settings(monkeypatch, flag, variable).nixl_side_channel_port == 18050
