"""``render -d DIR`` again: files an earlier render of the release left, and this one did not write, go."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from infctl.cli.main import app
from infctl.config import load_deployment
from infctl.manifests import RenderOptions, render
from infctl.manifests.render import remove_stale, write_files

PROFILES = Path(__file__).resolve().parents[3] / "profiles"
QWEN = PROFILES / "qwen3-8b-aggregated.yaml"


def test_a_second_render_leaves_only_what_it_wrote_of_its_release(tmp_path: Path) -> None:
    """They stayed: `kubectl apply -f DIR` then applied monitors turned off, or a renumbered copy of each."""
    profile = load_deployment(QWEN)
    other = render(load_deployment(PROFILES / "kimi-k2-pool.yaml"))
    write_files(other, tmp_path)  # another release shares the directory
    (tmp_path / "notes.yaml").write_text("kind: Note\n")  # and so does a file of the user's
    write_files(render(profile), tmp_path)
    fewer = render(profile, RenderOptions(monitoring=False))
    written = write_files(fewer, tmp_path)
    removed = remove_stale(fewer, tmp_path)
    assert removed and all("qwen3-8b" in p.name for p in removed)
    left = {p.name for p in tmp_path.glob("*.yaml")}
    assert {p.name for p in written} <= left and "notes.yaml" in left
    assert {n for n in left if "qwen3-8b" in n} == {p.name for p in written}
    assert len(left) == len(written) + len(other) + 1


def test_the_command_says_what_it_removed(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["render", "-f", str(QWEN), "-d", str(tmp_path)])
    assert first.exit_code == 0 and "removed" not in first.output
    again = runner.invoke(app, ["render", "-f", str(QWEN), "-d", str(tmp_path), "--no-monitoring"])
    assert again.exit_code == 0 and "removed" in again.output
    assert not list(tmp_path.glob("*monitor*")) and not list(tmp_path.glob("*prometheusrule*"))
