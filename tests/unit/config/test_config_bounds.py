"""Hostile profile files (alias bombs, devices, pipes, huge or deep files) fail fast with file:line.

The CLI cases run ``infctl validate`` / ``render`` in a subprocess under a 1 GB address-space limit: the old
loader expanded a 9-level alias bomb into gigabytes (MemoryError traceback here) and read ``/dev/zero``
until the limit; bounded, each answers exit code 2 with the file named.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infctl.autoscaler.setup import Options, build
from infctl.cli.main import _register, app
from infctl.config import (
    MAX_FILE_BYTES,
    MAX_NODES,
    load_deployment,
    load_profile,
    load_router,
    read_yaml,
)
from infctl.errors import ConfigError

ONE_GB = 1 << 30


def bomb(levels: int = 9, key: str = "lol") -> str:
    """A "billion laughs": each level lists nine aliases of the one before (9**levels strings)."""
    lines = ["name: demo", f"{key}:", '  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ONE_GB, ONE_GB))


def infctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
        env={**os.environ, "COLUMNS": "300"},
    )


def error_of(load: Callable[[Path], Any], path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(path)
    return info.value


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["lol", "model"])
def test_validate_refuses_an_alias_bomb_under_a_memory_limit(tmp_path: Path, key: str) -> None:
    path = write(tmp_path, "bomb.yaml", bomb(key=key))
    result = infctl("validate", "-f", str(path))
    assert result.returncode == 2, result.stderr
    assert f"{path}:" in result.stderr and "aliases expand the document past 100,000 values" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["render", "deploy", "diff", "delete", "status", "router", "autoscaler"])
def test_every_command_refuses_an_alias_bomb(tmp_path: Path, command: str) -> None:
    if not any(c.name == command for c in app.registered_commands):
        _register()
    path = write(tmp_path, "bomb.yaml", bomb())
    result = CliRunner().invoke(app, [command, "-f", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"{path}:8:12: YAML aliases expand the document" in result.output


@pytest.mark.timeout(60)
def test_validate_refuses_dev_zero_under_a_memory_limit() -> None:
    result = infctl("validate", "-f", "/dev/zero")
    assert result.returncode == 2, result.stderr
    assert "/dev/zero: is a character device, expected a regular YAML file" in result.stderr


def test_the_bomb_line_is_the_alias_that_crosses_the_budget(tmp_path: Path) -> None:
    err = error_of(load_deployment, write(tmp_path, "b.yaml", bomb()))
    # Levels a0-a4 hold 74,742 nodes with their keys; a5's first alias adds a4's 66,430: line 8, column 12.
    assert err.message.startswith(f"{tmp_path / 'b.yaml'}:8:12: YAML aliases expand the document past")
    assert err.hint is not None and "write the repeated part out" in err.hint


@pytest.mark.parametrize("load", [load_deployment, load_profile, load_router, lambda p: read_yaml(p, str(p))])
def test_every_loader_is_bounded(tmp_path: Path, load: Callable[[Path], Any]) -> None:
    assert "aliases expand" in error_of(load, write(tmp_path, "b.yaml", bomb())).message
    assert "character device" in error_of(load, Path("/dev/zero")).message


def test_a_referenced_model_file_is_bounded_too(tmp_path: Path) -> None:
    write(tmp_path, "m.yaml", bomb().replace("name: demo\n", ""))
    path = write(tmp_path, "d.yaml", "name: demo\nmode: aggregated\nmodel: m.yaml\n")
    assert error_of(load_deployment, path).message.startswith(f"{tmp_path / 'm.yaml'}:")


def test_the_autoscaler_file_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="aliases expand"):
        build(Options(file=write(tmp_path, "autoscaler.yaml", bomb())))
    with pytest.raises(ConfigError, match="character device"):
        build(Options(file=Path("/dev/zero")))


@pytest.mark.timeout(60)
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    err = error_of(load_deployment, fifo)
    assert err.message == f"{fifo}: is a FIFO (named pipe), expected a regular YAML file"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "near.yaml", "name: x\n")
    err = error_of(load_deployment, tmp_path)
    assert err.message == f"{tmp_path}: is a directory, expected a YAML file"
    assert err.hint is not None and "near.yaml" in err.hint


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB of NULs that are never read
    err = error_of(load_deployment, path)
    assert err.message == (
        f"{path}: too large to be a profile (52,428,800 bytes; the limit is {MAX_FILE_BYTES:,} bytes)"
    )


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    head = "name: demo\ntarget: local\nmode: aggregated\n"
    head += "model: {engine: vllm, model: m, sim: {profile: llama3-8b-h100}}\n"
    path = write(tmp_path, "x.yaml", head + "#" * (MAX_FILE_BYTES - len(head) - 1) + "\n")
    assert load_deployment(path).name == "demo"


def test_deep_nesting_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.yaml", "name: x\nk: " + "[" * 50_000 + "]" * 50_000 + "\n")
    err = error_of(load_deployment, path)
    assert err.message.startswith(f"{path}:2:") and "nested deeper than 100 levels" in err.message


def test_many_plain_values_are_refused_without_blaming_aliases(tmp_path: Path) -> None:
    path = write(tmp_path, "flat.yaml", "name: x\nk: [" + "1," * (MAX_NODES + 10) + "]\n")
    err = error_of(load_deployment, path)
    assert f"the document holds more than {MAX_NODES:,} values" in err.message
    assert err.message.startswith(f"{path}:2:")


def test_a_recursive_alias_is_refused_at_the_alias(tmp_path: Path) -> None:
    err = error_of(load_deployment, write(tmp_path, "r.yaml", "name: x\nk: &a [1, *a]\n"))
    assert err.message.startswith(
        f"{tmp_path / 'r.yaml'}:2:11: the alias *a refers to the collection it is in"
    )


def test_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"name: demo\nmode: group\n# caf\xe9\n")
    assert error_of(load_deployment, path).message == (f"{path}:3: not UTF-8 text (byte 0xe9 at offset 28)")


def test_ordinary_aliases_and_merge_keys_still_load(tmp_path: Path) -> None:
    text = """\
    base: &base {a: 1, b: [x, y]}
    one: {<<: *base, c: 3}
    two: *base
    """
    data, locations = read_yaml(write(tmp_path, "x.yaml", textwrap.dedent(text)), "x.yaml")
    assert data["one"] == {"a": 1, "b": ["x", "y"], "c": 3} and data["two"] == data["base"]
    assert str(locations[("one", "c")]) == "x.yaml:2"
