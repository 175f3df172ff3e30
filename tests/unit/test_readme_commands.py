"""The README's commands cannot rot: CI runs its two first commands as written (``.ci/run``, through
tools/readme_commands.py); here every ``infctl`` command in it is parsed by the real CLI (a renamed flag, a
value a flag no longer takes, a command that moved fail), every profile it names must load, and the ones
that only read profiles and write into the working directory run as written."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main

from infctl.cli.flags import bare_dry_run
from infctl.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
RUN_AS_WRITTEN = {"validate", "render"}  # read profiles, write only into the working directory


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / "tools" / "readme_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _tool()
README = (ROOT / "README.md").read_text()
INFCTL = [argv for block in tool.blocks(README) for argv in tool.commands(block) if argv[0] == "infctl"]


def parse(args: list[str]) -> Any:
    """The click context the real CLI builds for ``infctl ARGS``: every option and argument parsed and
    converted, nothing run. Raises click's usage errors as the CLI would report them."""
    args = bare_dry_run(args)
    command = typer.main.get_command(app)
    ctx = command.make_context("infctl", [], resilient_parsing=True)
    while hasattr(command, "get_command") and args and not args[0].startswith("-"):
        sub = command.get_command(ctx, args[0])
        if sub is None:
            break
        name, args, command = args[0], args[1:], sub
        deeper = hasattr(sub, "get_command") and args and not args[0].startswith("-")
        if deeper and sub.get_command(ctx, args[0]) is not None:
            ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        else:
            return sub.make_context(name, args, parent=ctx)
    return command.make_context("infctl", args, parent=ctx)


def test_the_two_first_commands_are_marked_for_ci_and_ci_runs_them() -> None:
    marked = tool.marked_blocks(README)
    assert tool.blocks(README)[:2] == [marked["demo"], marked["tests"]]
    assert [argv[:2] for argv in tool.commands(marked["demo"])] == [["pip", "install"], ["infctl", "demo"]]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tools/readme_commands.py demo" in ci and "tools/readme_commands.py tests" in ci
    # CI runs the README's test command, not a copy of it that could drift.
    assert "\npython -m pytest\n" not in ci


def test_commands_are_split_as_a_shell_would() -> None:
    block = "a -x 1 && b 'c d'   # why\nlong \\\n    --flag v\n# only a comment\n"
    assert tool.commands(block) == [["a", "-x", "1"], ["b", "c d"], ["long", "--flag", "v"]]
    with pytest.raises(ValueError, match="twice"):
        tool.marked_blocks("<!-- ci: x -->\n```bash\na\n```\n<!-- ci: x -->\n```bash\nb\n```\n")


def test_the_tool_prints_a_marked_block_verbatim_and_refuses_an_unknown_name() -> None:
    script = str(ROOT / "tools" / "readme_commands.py")
    done = subprocess.run([sys.executable, script, "tests"], capture_output=True, text=True, check=True)
    assert done.stdout == tool.marked_blocks(README)["tests"]
    missing = subprocess.run([sys.executable, script, "nope"], capture_output=True, text=True)
    assert missing.returncode == 2 and "ci: nope" in missing.stderr


def test_the_readme_names_infctl_commands_across_the_cli() -> None:
    named = {parse(argv[1:]).command_path for argv in INFCTL}
    assert {
        "infctl demo",
        "infctl deploy",
        "infctl render",
        "infctl cutover",
        "infctl bench compare",
    } <= named


@pytest.mark.parametrize("argv", INFCTL, ids=[" ".join(a[:3]) for a in INFCTL])
def test_every_infctl_command_in_the_readme_parses(argv: list[str]) -> None:
    ctx = parse(argv[1:])
    assert ctx.command_path.split()[1] == argv[1]


def test_a_flag_the_cli_does_not_have_is_caught() -> None:
    for args in (["validate", "-f", "profiles/", "--no-such-flag"], ["delete", "x", "--dry-run=maybe"]):
        with pytest.raises(Exception) as caught:  # click's UsageError, from whichever click Typer bundles
            parse(args)
        assert getattr(caught.value, "exit_code", None) == 2, caught.value


def test_every_profile_the_readme_names_loads() -> None:
    named = sorted({w for argv in INFCTL for w in argv if w.startswith("profiles/") and w != "profiles/"})
    assert named, "the README names no profile"
    done = subprocess.run(
        [sys.executable, "-m", "infctl", "validate", *[x for p in named for x in ("-f", p)]],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    "argv",
    [a for a in INFCTL if a[1] in RUN_AS_WRITTEN],
    ids=lambda a: " ".join(a[1:4]),
)
def test_the_commands_that_only_read_profiles_run_as_written(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "profiles").symlink_to(ROOT / "profiles")  # relative paths resolve as in the checkout
    done = subprocess.run(
        [sys.executable, "-m", "infctl", *argv[1:]], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, (argv, done.stderr[-2000:])
    if argv[1] == "render":  # it wrote its objects where -d says
        assert list((tmp_path / parse(argv[1:]).params["output_dir"]).glob("*.yaml"))
