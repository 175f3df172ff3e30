"""Every flag that takes a URL refuses one without its scheme the same way: bad input, exit 2, one red line
with the fix, nothing on stdout, nothing contacted (docs/cli.md). Before, bench --url and doctor
--engine-url exited 2 while cutover --router, doctor --router/--autoscaler and sim calibrate --url tried
the bare host:port and exited 1 as a failed connection; bench --engine-url and the autoscaler's URL flags
were not checked at all."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from infctl.cli.main import COMMANDS, app, load_command

runner = CliRunner()

URL_FLAGS = {
    ("bench", "--url"),
    ("bench", "--engine-url"),
    ("doctor", "--engine-url"),
    ("doctor", "--router"),
    ("doctor", "--autoscaler"),
    ("cutover", "--router"),
    ("cutover", "--prometheus"),
    ("cutover", "--metrics-url"),
    ("cutover status", "--router"),
    ("autoscaler", "--router"),
    ("autoscaler", "--prometheus"),
    ("autoscaler", "--control-url"),
    ("router", "--backend"),
    ("sim calibrate", "--url"),
}
"""(command, flag) for every URL flag, as docs/cli.md lists them."""


def _url_flags(command: Any, path: str) -> set[tuple[str, str]]:
    found = {
        (path, max(p.opts, key=len))
        for p in command.params
        if (getattr(p, "metavar", None) or "").startswith("URL")
    }
    for name, sub in getattr(command, "commands", {}).items():
        found |= _url_flags(sub, f"{path} {name}")
    return found


def test_every_url_flag_declares_itself_a_url() -> None:
    """The list below is the CLI's own: a URL flag added without url_option (metavar URL) shows up here."""
    found: set[tuple[str, str]] = set()
    for name, (module, _) in COMMANDS.items():
        found |= _url_flags(load_command(module, name), name)
    assert found == URL_FLAGS


@pytest.mark.parametrize("command, flag", sorted(URL_FLAGS))
def test_a_url_without_its_scheme_is_bad_input(command: str, flag: str) -> None:
    bare = "127.0.0.1:9"  # nothing listens on the discard port: a connection would fail as exit 1
    value = f"{bare},role=decode" if flag == "--backend" else bare
    result = runner.invoke(app, [*command.split(), flag, value], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert f"{flag}" in result.stderr and "expected http(s)://host[:port]" in result.stderr
    assert f"fix: {flag} http://{value}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_check_reads_the_url_before_a_spec_and_suggests_the_fix() -> None:
    from infctl.cli.flags import check_url
    from infctl.errors import ConfigError

    assert check_url("--engine-url", "https://h:8000/v1,engine=sglang", spec=True).startswith("https://")
    with pytest.raises(ConfigError) as bad_port:
        check_url("--router", "http://h:99999")
    assert (
        "out of range" in bad_port.value.message
        and bad_port.value.hint == "e.g. --router http://127.0.0.1:8000"
    )
    with pytest.raises(ConfigError) as spec:
        check_url("--engine-url", "h:8000,engine=sglang", spec=True)
    assert spec.value.message.startswith("--engine-url h:8000,engine=sglang: expected http(s)")
    assert spec.value.hint == "--engine-url http://h:8000,engine=sglang"
    with pytest.raises(ConfigError) as quoted:
        check_url("--url", "my host:8000")
    assert quoted.value.hint == "--url 'http://my host:8000'"
