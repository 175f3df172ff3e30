"""``infctl sim --tokenizer``: the default is the simulator's words; a tokenizer that does not load stops the
simulator before it listens, with one line naming the file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.sim.settings import SimSettings


def test_the_default_is_words() -> None:
    assert SimSettings().tokenizer == "words"


def test_a_tokenizer_that_does_not_load_is_a_clear_error(tmp_path: Path) -> None:
    if not any(g.name == "sim" for g in app.registered_groups):
        _register()
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    result = CliRunner().invoke(app, ["sim", "--port", "0", "--tokenizer", str(broken)])
    assert result.exit_code == 2, result.output
    assert str(broken) in result.output and "Traceback" not in result.output
