"""``infctl validate``'s table names the file on one line, as it is copied."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from infctl.cli.main import app

PROFILES = Path(__file__).resolve().parents[3] / "profiles"


def test_the_file_is_named_whole_above_its_summary(tmp_path: Path) -> None:
    """The title wrapped at the (narrow) table's width: `.../deepseek-v3-sglang.y` then `aml`."""
    deep = tmp_path / "a-rather-long-folder-name" / "of-profiles"
    deep.mkdir(parents=True)
    path = deep / "deepseek-v3-sglang.yaml"
    shutil.copy(PROFILES / "models" / "deepseek-v3-sglang.yaml", path)
    result = CliRunner().invoke(app, ["validate", "-f", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert f"valid model: {path}\n" in result.output
