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
            "--no-traffic", "--no-monitoring"]  # fmt: skip
    result = CliRunner().invoke(_app(seen), argv)
    assert result.exit_code == 0, result.output
    assert seen == [
        ("y", RenderOptions(image="i:1", anti_affinity="required", gateway="gw/g", old_backend="old:80",
                            weight=10, inference_pool_epp="epp", traffic=False, monitoring=False)),
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
                 "--inference-pool-epp", "--no-traffic", "--no-monitoring", "--name"):  # fmt: skip
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
