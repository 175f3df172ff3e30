"""The render flags shared by render, diff and deploy: one declaration, RenderOptions' defaults, checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from infctl.cli.render_flags import render_options, with_render_flags
from infctl.config import load_deployment
from infctl.errors import ConfigError
from infctl.manifests import RenderOptions

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"  # namespace: inference


def _app(seen: list[tuple[str, RenderOptions]]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @with_render_flags
    def cmd(name: str = "x", *, options: RenderOptions) -> None:
        seen.append((name, options))

    return app


def test_flags_reach_the_command_as_render_options() -> None:
    seen: list[tuple[str, RenderOptions]] = []
    argv = ["--name", "y", "--image", "i:1", "--anti-affinity", "required", "--gateway", "gw/g",
            "--old-backend", "old:80", "--weight", "10", "--inference-pool-epp", "epp",
            "--no-traffic", "--no-monitoring", "--admin-token-secret", "shared-admin"]  # fmt: skip
    result = CliRunner().invoke(_app(seen), argv)
    assert result.exit_code == 0, result.output
    assert seen == [
        ("y", RenderOptions(image="i:1", anti_affinity="required", gateway="gw/g", old_backend="old:80",
                            weight=10, inference_pool_epp="epp", traffic=False, monitoring=False,
                            admin_token_secret="shared-admin")),
    ]  # fmt: skip


def test_no_flags_means_render_options_defaults() -> None:
    seen: list[tuple[str, RenderOptions]] = []
    result = CliRunner().invoke(_app(seen), [])
    assert result.exit_code == 0, result.output
    assert seen == [("x", RenderOptions())]


def test_help_lists_every_flag_and_keeps_brackets() -> None:
    result = CliRunner().invoke(_app([]), ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--image", "--anti-affinity", "--gateway", "--old-backend", "--weight",
                 "--inference-pool-epp", "--no-traffic", "--no-monitoring", "--admin-token-secret",
                 "--name"):  # fmt: skip
        assert flag in result.output
    assert "[ns/]name" in result.output and "--options" not in result.output


def test_namespace_profile_then_flag_then_fallback() -> None:
    with_ns = load_deployment(QWEN)
    without = load_deployment(QWEN, ["namespace=null"])
    assert render_options(with_ns, None, RenderOptions(), fallback="ctx").namespace == "inference"
    assert render_options(without, "team", RenderOptions(), fallback="ctx").namespace == "team"
    assert render_options(without, None, RenderOptions(), fallback="ctx").namespace == "ctx"
    assert render_options(without, None, RenderOptions()).namespace == "default"


def test_bad_anti_affinity_and_disagreeing_namespace_are_config_errors() -> None:
    profile = load_deployment(QWEN)
    with pytest.raises(ConfigError, match="--anti-affinity"):
        render_options(profile, None, RenderOptions(anti_affinity="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="disagrees") as e:
        render_options(profile, "other", RenderOptions())
    assert e.value.hint == "drop -n, or --set namespace=other"


@pytest.mark.parametrize("name", ["Shared", "-x", "a_b", "x" * 254, ""])
def test_an_impossible_secret_name_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="--admin-token-secret") as e:
        render_options(load_deployment(QWEN), None, RenderOptions(admin_token_secret=name))
    assert e.value.hint is not None and "lowercase" in e.value.hint
    ok = render_options(load_deployment(QWEN), None, RenderOptions(admin_token_secret="team.admin-1"))
    assert ok.admin_token_secret == "team.admin-1"


def test_render_reads_the_named_secret_and_says_deploy_will_not_create_it() -> None:
    from infctl.cli.main import _register, app

    _register()
    kimi = str(ROOT / "profiles" / "kimi-k2-pool.yaml")
    result = CliRunner().invoke(app, ["render", "-f", kimi, "--admin-token-secret", "shared-admin"])
    assert result.exit_code == 0, result.output
    assert "name: shared-admin" in result.output and "kimi-k2-router-admin" not in result.output
    assert "never creates a named Secret" in result.output
    default = CliRunner().invoke(app, ["render", "-f", kimi])
    assert "name: kimi-k2-router-admin" in default.output and "creates it when missing" in default.output
