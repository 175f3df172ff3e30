"""The conventions a kubectl or helm user expects (issue 21), through the real root app: ``-f`` repeatable,
globbed and given directories; global options after the command; ``-o`` the output format everywhere;
release names positional; ``--dry-run=none|client|server``; one duration parser; one name, one meaning."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infctl.cli.flags import bare_dry_run
from infctl.cli.main import COMMANDS, app
from infctl.cutover.plan import parse_duration as cutover_duration
from infctl.durations import parse_duration
from infctl.errors import ConfigError
from infctl.sim.faults import parse_faults

ROOT = Path(__file__).resolve().parents[3]
PROFILES = ROOT / "profiles"
runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def two_profiles(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "good.yaml"
    shutil.copy(PROFILES / "local-demo.yaml", good)
    bad = tmp_path / "bad.yaml"
    bad.write_text((PROFILES / "local-demo.yaml").read_text() + "bogus: 1\n")
    return good, bad


def test_validate_checks_every_file_given_with_f(two_profiles: tuple[Path, Path]) -> None:
    good, bad = two_profiles
    # Before: only the last -f counted, so a bad first file passed (exit 0).
    code, _, err = invoke("validate", "-f", str(bad), "-f", str(good))
    assert code == 2 and "bad.yaml" in err and "bogus" in err and "1 of 2 profiles are invalid" in err
    code, out, _ = invoke("validate", "-f", str(good), "-f", str(good.with_name("good.yaml")), "-o", "json")
    assert code == 0 and json.loads(out)["name"] == "local-demo"  # the same file twice is checked once


@pytest.mark.parametrize("command", ["render", "diff", "deploy"])
def test_every_bad_file_given_with_f_is_reported_before_anything_is_done(
    command: str, tmp_path: Path
) -> None:
    """They stopped at the first bad profile, hiding the next (docs/cli.md: one does not hide the others)."""
    text = (PROFILES / "qwen3-8b-aggregated.yaml").read_text().replace("models/", f"{PROFILES}/models/")
    text = text.replace("clusters/", f"{PROFILES}/clusters/")
    (tmp_path / "good.yaml").write_text(text)
    (tmp_path / "bad1.yaml").write_text(text + "bogus: 1\n")
    (tmp_path / "bad2.yaml").write_text(text + "replica: 2\n")
    files = [arg for name in ("bad1", "good", "bad2") for arg in ("-f", str(tmp_path / f"{name}.yaml"))]
    code, out, err = invoke(command, *files, env={"KUBECONFIG": str(tmp_path / "none")})
    assert code == 2 and out == "", err
    assert "bad1.yaml" in err and "bogus" in err and "bad2.yaml" in err and "'replica'" in err
    assert "2 of 3 profiles are invalid" in err and "Traceback" not in err


def test_validate_takes_directories_globs_and_shell_expanded_lists(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yml", "c.json"):
        profile = yaml.safe_load((PROFILES / "local-demo.yaml").read_text()) | {"name": name.split(".")[0]}
        (tmp_path / name).write_text(
            json.dumps(profile) if name.endswith("json") else yaml.safe_dump(profile)
        )
    (tmp_path / "notes.txt").write_text("not a profile")
    code, out, _ = invoke("validate", "-f", str(tmp_path), "-o", "json")
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["a", "b", "c"]
    code, out, _ = invoke("validate", "-f", str(tmp_path / "*.y*ml"), "-o", "json")
    assert code == 0 and [d["name"] for d in json.loads(out)] == ["a", "b"]
    code, out, _ = invoke("validate", "-f", str(tmp_path / "a.yaml"), str(tmp_path / "b.yml"), "-o", "json")
    assert code == 0 and len(json.loads(out)) == 2
    code, _, err = invoke("validate", "-f", str(tmp_path / "*.toml"))
    assert code == 2 and "no file matches" in err
    (tmp_path / "empty").mkdir()
    code, _, err = invoke("validate", "-f", str(tmp_path / "empty"))
    assert code == 2 and "no .yaml, .yml, .json files" in err


def test_global_options_are_accepted_after_the_command(tmp_path: Path) -> None:
    profile = str(PROFILES / "local-demo.yaml")
    code, out, _ = invoke("validate", "-f", profile, "-o", "json")  # before: "No such option: -o"
    assert code == 0 and json.loads(out)["name"] == "local-demo"
    code, out, _ = invoke("validate", "-f", profile, "--output=yaml")
    assert code == 0 and yaml.safe_load(out)["name"] == "local-demo"
    code, out, _ = invoke("-o", "json", "validate", "-f", profile)
    assert code == 0 and json.loads(out)["name"] == "local-demo"
    code, out, _ = invoke("status", "--run-dir", str(tmp_path), "-o", "json", "-v")
    assert code == 0 and json.loads(out) == []


def test_a_command_that_owns_a_global_name_keeps_it() -> None:
    bench = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "200"})
    assert bench.exit_code == 0 and "--num-requests" in bench.stdout
    assert "--namespace" in bench.stdout  # the global option, under its long name only


def test_render_o_is_the_format_and_d_the_directory(tmp_path: Path) -> None:
    qwen = str(PROFILES / "qwen3-8b-aggregated.yaml")
    code, out, _ = invoke("render", "-f", qwen, "-o", "json")  # before: 26 YAML files in ./json/
    assert code == 0 and {o["kind"] for o in json.loads(out)} >= {"Deployment", "Service"}
    assert not Path("json").exists()
    code, _, err = invoke(
        "render", "-f", qwen, "-f", str(PROFILES / "kimi-k2-pool.yaml"), "-d", str(tmp_path)
    )
    files = sorted(p.name for p in tmp_path.iterdir())
    assert (
        code == 0
        and "wrote" in err
        and any("qwen3-8b" in f for f in files)
        and any("kimi" in f for f in files)
    )


def test_release_names_are_positional_with_release_as_an_alias(tmp_path: Path) -> None:
    code, _, err = invoke("status", "nope", "--run-dir", str(tmp_path))
    assert code != 0 and "no local release 'nope'" in err
    code, _, err = invoke("status", "--release", "nope", "--run-dir", str(tmp_path))
    assert code != 0 and "no local release 'nope'" in err
    code, _, err = invoke("status", "a", "--release", "b")
    assert code == 2 and "disagree" in err
    code, out, _ = invoke("delete", "r1", "r2", "--run-dir", str(tmp_path), "-o", "json")
    assert code == 0 and [r["release"] for r in json.loads(out)] == ["r1", "r2"]
    code, _, err = invoke("delete", "--run-dir", str(tmp_path))
    assert code == 2 and "infctl delete NAME" in err


def test_dry_run_is_none_client_or_server(tmp_path: Path) -> None:
    # Before: delete took any string, autoscaler and cutover a switch.
    code, _, err = invoke("delete", "r", "--run-dir", str(tmp_path), "--dry-run=maybe")
    assert code == 2 and "--dry-run" in err
    code, _, err = invoke("delete", "r", "--run-dir", str(tmp_path), "--dry-run")
    assert code == 2 and "applies to Kubernetes releases" in err  # bare --dry-run is client, as kubectl
    assert bare_dry_run(["deploy", "--dry-run", "-f", "x"]) == ["deploy", "--dry-run=client", "-f", "x"]
    assert bare_dry_run(["deploy", "--dry-run", "server"]) == ["deploy", "--dry-run", "server"]
    assert bare_dry_run(["x", "--", "--dry-run"]) == ["x", "--", "--dry-run"]
    for command in ("deploy", "delete", "autoscaler", "cutover"):
        text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250"}).stdout
        assert "server" in text and "client" in text, command


def test_one_duration_parser_for_every_command() -> None:
    assert parse_duration("90s") == 90 and parse_duration("10m") == 600 and parse_duration("1h") == 3600
    assert parse_duration("500ms") == 0.5 and parse_duration("2") == 2
    assert parse_faults(["crash-after=1h"]).crash_after == 3600  # before: refused ("invalid duration")
    assert cutover_duration("1h") == 3600
    for bad in ("1x", "", "-1s", "1e999"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    code, _, err = invoke("doctor", "--engine-url", "http://127.0.0.1:9", "--timeout", "ten")
    assert code == 2 and "cannot read 'ten' as a duration" in err


def test_one_name_one_meaning() -> None:
    # doctor's engines are --engine-url (bench's name), --engines is a count (simulate run);
    # the autoscaler's supervisor URL is --control-url, --local names a release (doctor).
    code, _, err = invoke("doctor", "--engines", "http://127.0.0.1:9")
    assert code == 2 and "No such option" in err
    code, _, err = invoke("autoscaler", "--local", "http://127.0.0.1:9")
    assert code == 2 and "No such option" in err
    # -d is render's --output-dir only; --time-scale is wall seconds per simulated second (sim, autoscaler),
    # not simulate run's trace speed-up (--time-compression, as bench).
    code, _, err = invoke("deploy", "-d", "-f", str(PROFILES / "local-demo.yaml"))
    assert code == 2 and "No such option" in err
    code, _, err = invoke("simulate", "run", "--time-scale", "10")
    assert code == 2 and "No such option" in err
    doctor = runner.invoke(app, ["doctor", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--engine-url" in doctor and "--local" in doctor and "--all" in doctor


def test_help_lists_every_command_without_importing_one() -> None:
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from infctl.cli.main import app\n"
        "out = CliRunner().invoke(app, ['--help'], env={'COLUMNS': '200'}).stdout\n"
        "loaded = [m for m in sys.modules if m.startswith('infctl.cli.') and m not in "
        "('infctl.cli.main', 'infctl.cli.context', 'infctl.cli.flags')]\n"
        "print(loaded); print(out)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded, _, text = done.stdout.partition("\n")
    assert loaded == "[]", loaded
    for name, (_, line) in COMMANDS.items():
        assert (f"\n  {name} " in text) is bool(line), name
        assert not line or line in text  # whole, not cut to the terminal's width
    assert "infctl demo" in text


def test_every_command_loads_with_the_global_options() -> None:
    for name in COMMANDS:
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (name, result.output)
        assert "--output" in result.stdout and "--kubeconfig" in result.stdout, name


@pytest.mark.parametrize("name", [name for name, (_, line) in COMMANDS.items() if line])
def test_every_commands_help_has_examples(name: str) -> None:
    """As the README and docs/cli.md promise; diff and demo had none."""
    result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert "Examples" in result.stdout and f"infctl {name}" in result.stdout.split("Examples")[1], name


def test_router_with_its_port_taken_prints_one_line_and_exits_2() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "infctl",
                "router",
                "--port",
                str(port),
                "--backend",
                "http://127.0.0.1:9",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "INFCTL_ROUTER_ADMIN_TOKEN": "t"},
        )
    assert done.returncode == 2, done.stderr  # before: exit 1 and a 40-line traceback
    assert "Traceback" not in done.stderr
    assert f"router cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "fix: pick another --port" in done.stderr


def test_version_answers_without_importing_typer() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infctl", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("infctl ") and " typer" not in done.stderr
